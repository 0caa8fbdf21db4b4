"""A broker that hangs (frozen, not gone) costs a request a bounded wait, never the whole hang (issue 39, item 5).

The suite's real Valkey is frozen with SIGSTOP: it still accepts connections
but answers nothing, which is what a wedged broker or a half-open link looks
like. Before the broker had a socket timeout, a memory write waited for as
long as the freeze lasted (30 s in the attack run, the whole freeze here).
"""

import threading

import pytest
from django.conf import settings
from django.db import connection

from rag_site.celery import app
from sources.models import IndexStatus, Memory
from sources.queueing import BROKER_WAIT
from tests.conftest import api_client, broker_frozen

pytestmark = pytest.mark.django_db(transaction=True)  # the request's thread commits; the send runs on commit

# Only a guard against a hang: far above what a request costs with the broker's timeout (a few of
# BROKER_TIMEOUT_SECONDS), far below the freeze, which lasts until the guard has run out.
HANG_GUARD_SECONDS = 30


def in_thread(call):
    """Run ``call()`` on a thread; returns (thread, results): results holds its return value once it ends."""
    results: list = []

    def run() -> None:
        try:
            results.append(call())
        finally:
            connection.close()  # this thread's own database connection

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, results


def test_the_broker_timeouts_reach_the_connection_that_publishes():
    assert settings.BROKER_TIMEOUT_SECONDS < HANG_GUARD_SECONDS / 10
    with app.connection_for_write() as connection:
        kwargs = connection.default_channel.client.connection_pool.connection_kwargs
    assert kwargs["socket_timeout"] == kwargs["socket_connect_timeout"] == settings.BROKER_TIMEOUT_SECONDS
    assert app.conf.task_publish_retry_policy["max_retries"] == 1


def test_a_memory_written_while_the_broker_hangs_is_accepted_and_waits_for_it(settings):
    settings.RAG_RATE_LIMIT_PER_MINUTE = 0
    client = api_client(name="frozen", bot_id="alpha")
    with broker_frozen():
        remember = {"text": "The axolotl tank is 18 C."}
        thread, results = in_thread(lambda: client.post("/api/v1/memories", remember, content_type="application/json"))
        thread.join(HANG_GUARD_SECONDS)
        hung = thread.is_alive()
    thread.join()  # thawed: a hung request ends now
    assert not hung, "the memory write waited for the frozen broker"
    assert results[0].status_code == 201, results[0].content
    memory = Memory.objects.get(pk=results[0].json()["id"])
    # Not lost: queued, with the note the recovery sweep resends by.
    assert memory.index_status == IndexStatus.QUEUED and memory.last_error.startswith(BROKER_WAIT)


def test_a_search_while_the_broker_hangs_is_answered(settings):
    client = api_client(name="searcher")
    with broker_frozen():
        thread, results = in_thread(
            lambda: client.post("/api/v1/search", {"query": "axolotl"}, content_type="application/json")
        )
        thread.join(HANG_GUARD_SECONDS)
        hung = thread.is_alive()
    thread.join()
    assert not hung, "the search waited for the frozen broker"
    assert results[0].status_code == 200, results[0].content
