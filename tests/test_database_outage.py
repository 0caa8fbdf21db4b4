"""A dropped or restarted database connection (issue 22, finding 8).

Real PostgreSQL: the request's own backend is terminated from another
connection (pg_terminate_backend, what an operator, a failover or a crashed
backend's restart does to it). A read is run again once on a fresh
connection; a write, or a read whose fresh connection is dropped too,
answers 503 with Retry-After in the caller's language.
"""

import json
import logging
import os
import signal
import threading
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.backends.signals import connection_created
from django.test import Client

from access.keys import api_key_create
from retrieval import answers
from sources import services
from sources.models import IndexJob
from tests.conftest import api_client, wait_for
from tests.factories import SkillFactory

# Committed rows and autocommit: the request's connection is not held in the test's transaction.
pytestmark = pytest.mark.django_db(transaction=True)

OTTER = "# Otter\n\nThe otter holds hands while sleeping.\n"
SEARCH = json.dumps({"query": "otter", "mode": "lexical"})


def terminate(pid: int) -> None:
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    with psycopg.connect(**params, autocommit=True) as admin:
        # Waits (up to 5 s) until the backend is gone, so the next query cannot slip in before it.
        assert admin.execute("SELECT pg_terminate_backend(%s, 5000)", [pid]).fetchone()[0]


def drop_connection() -> None:
    """Terminate this thread's open database connection, as PostgreSQL does when it restarts."""
    connection.ensure_connection()
    terminate(connection.connection.info.backend_pid)


@contextmanager
def database_down() -> Iterator[None]:
    """Every connection is dropped, and every new one as soon as it opens: the database is restarting."""

    def drop_new(sender, connection, **kwargs) -> None:
        terminate(connection.connection.info.backend_pid)

    drop_connection()
    connection_created.connect(drop_new)
    try:
        yield
    finally:
        connection_created.disconnect(drop_new)


@pytest.fixture
def otter(settings):
    settings.RAG_RATE_LIMIT_PER_MINUTE = 0
    services.skill_index(skill_id=SkillFactory(slug="otter", body=OTTER).pk)


def test_a_search_whose_connection_was_dropped_is_run_again_on_a_fresh_one(otter, caplog):
    client = api_client()
    drop_connection()
    with caplog.at_level(logging.WARNING, logger="surfaces.middleware"):
        response = client.post("/api/v1/search", data=SEARCH, content_type="application/json")
    assert response.status_code == 200, response.content
    assert [hit["source_key"] for hit in response.json()["hits"]] == ["skill:otter"]
    assert "running it again on a fresh connection" in caplog.text  # it did fail once


@pytest.mark.parametrize("url", ["/api/v1/skills", "/api/v1/skills/otter"])
def test_a_get_whose_connection_was_dropped_is_run_again(otter, url):
    client = api_client()
    drop_connection()
    response = client.get(url)
    assert response.status_code == 200, response.content


def test_the_search_page_whose_connection_was_dropped_is_run_again(otter):
    client = Client()
    client.force_login(get_user_model().objects.create_user("person", password="a-long-test-password"))
    drop_connection()
    response = client.get("/", {"q": "otter"})
    assert response.status_code == 200
    assert "Otter" in response.content.decode()


def mcp_call(client: Client, message: dict):
    return client.post(
        "/mcp",
        data=json.dumps(message),
        content_type="application/json",
        headers={"Accept": "application/json, text/event-stream"},
    )


def test_an_mcp_search_whose_connection_was_dropped_inside_the_tool_is_run_again(otter, monkeypatch):
    # Dropped after the key was checked, inside the tool, where the SDK would have made it a tool error.
    armed = [True]

    def search_answer(identity, payload):
        if armed:
            armed.pop()
            drop_connection()
        return answers.search_answer(identity, payload)

    monkeypatch.setattr("surfaces.mcp.search_answer", search_answer)
    message = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "search", "arguments": {"query": "otter"}},
    }
    response = mcp_call(api_client(), message)
    assert response.status_code == 200, response.content
    result = response.json()["result"]
    assert not result.get("isError"), result
    assert [hit["source_key"] for hit in result["structuredContent"]["hits"]] == ["skill:otter"]
    assert not armed


def test_a_write_whose_connection_was_dropped_answers_503_with_retry_after_and_is_not_run_again(readme_root):
    client = api_client(name="operator", can_manage=True)
    drop_connection()
    response = client.post(f"/api/v1/roots/{readme_root.pk}/reindex", data="{}", content_type="application/json")
    assert response.status_code == 503, response.content
    assert int(response["Retry-After"]) >= 1
    assert "database" in response.json()["error"]
    assert not IndexJob.objects.exists()
    # The lost connection was replaced: the client's retry is served.
    again = client.post(f"/api/v1/roots/{readme_root.pk}/reindex", data="{}", content_type="application/json")
    assert again.status_code == 202, again.content


def test_a_sign_in_whose_connection_was_dropped_answers_a_plain_503_page():
    get_user_model().objects.create_user("person", password="a-long-test-password")
    client = Client()
    drop_connection()
    response = client.post("/accounts/login/", {"username": "person", "password": "a-long-test-password"})
    assert response.status_code == 503
    assert response["Content-Type"].startswith("text/plain") and response["Retry-After"]
    assert "database" in response.content.decode()


def test_while_the_database_stays_down_reads_answer_503_in_each_surfaces_language(otter):
    client = api_client()
    page = Client()
    page.force_login(get_user_model().objects.create_user("person", password="a-long-test-password"))
    message = {"jsonrpc": "2.0", "id": "call-1", "method": "tools/list"}
    with database_down():
        api = client.post("/api/v1/search", data=SEARCH, content_type="application/json")
        mcp = mcp_call(client, message)
        html = page.get("/", {"q": "otter"})
    assert api.status_code == 503 and api["Retry-After"] and "database" in api.json()["error"]
    assert mcp.status_code == 503 and mcp["Retry-After"]
    assert (
        mcp.json()["jsonrpc"] == "2.0" and mcp.json()["id"] == "call-1" and "database" in mcp.json()["error"]["message"]
    )
    assert html.status_code == 503 and html["Retry-After"] and html["Content-Type"].startswith("text/plain")
    # Back up: the next request is served as usual.
    assert client.post("/api/v1/search", data=SEARCH, content_type="application/json").status_code == 200


def _search_over_http(url: str, key: str, statuses: Counter, stop: threading.Event) -> None:
    request = urllib.request.Request(
        url + "/api/v1/search",
        data=SEARCH.encode(),
        method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    while not stop.is_set():
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                statuses[answer.status] += 1
        except urllib.error.HTTPError as refused:
            statuses[refused.code] += 1
            if refused.code == 503:
                statuses["503 with Retry-After"] += bool(refused.headers.get("Retry-After"))


@contextmanager
def searching(live_server, clients: int) -> Iterator[Counter]:
    """``clients`` threads searching over HTTP until the block ends; the answers' statuses."""
    _, key = api_key_create(name="searcher")
    statuses: Counter = Counter()
    stop = threading.Event()
    threads = [
        threading.Thread(target=_search_over_http, args=(live_server.url, key, statuses, stop)) for _ in range(clients)
    ]
    for thread in threads:
        thread.start()
    try:
        yield statuses
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def other_backends(admin: psycopg.Connection) -> list[int]:
    # Every client connection to the test database but the admin's and this thread's: the server's.
    mine = connection.connection.info.backend_pid
    return [
        pid
        for (pid,) in admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' "
            "AND pid <> pg_backend_pid() AND pid <> %s",
            [mine],
        )
    ]


@pytest.mark.slow
def test_searches_while_the_servers_backends_keep_being_terminated_get_no_server_error(live_server, otter):
    connection.ensure_connection()
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    terminated = 0
    with psycopg.connect(**params, autocommit=True) as admin, searching(live_server, clients=4) as statuses:
        while terminated < 40:
            for pid in other_backends(admin):
                terminated += admin.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone()[0]
            # Paced by the searchers' progress, not the clock: a few answers between two rounds.
            enough = statuses.total() + 4
            wait_for(lambda enough=enough: statuses.total() >= enough, timeout=60, interval=0.01, what="more answers")
    print(f"\n{terminated} backends terminated under 4 searching clients: {dict(statuses)}")
    assert statuses[200] > 0
    assert not [status for status in statuses if isinstance(status, int) and status >= 500 and status != 503], statuses
    assert statuses["503 with Retry-After"] == statuses[503]


@pytest.mark.slow
def test_searches_while_postgresql_restarts_after_a_killed_backend_get_503_with_retry_after_not_500(live_server, otter):
    # SIGKILL on any backend makes PostgreSQL end every connection and recover before it accepts new ones.
    connection.ensure_connection()
    victim = connection.connection.info.backend_pid
    with searching(live_server, clients=4) as statuses:
        wait_for(lambda: statuses[200] >= 4, what="searches before the crash")
        os.kill(victim, signal.SIGKILL)
        connection.close()  # this thread's connection went with it
        answered = statuses[200]
        wait_for(lambda: statuses[200] >= answered + 20, timeout=120, interval=0.05, what="searches after the restart")
    print(f"\nbackend {victim} killed under 4 searching clients: {dict(statuses)}")
    assert not [status for status in statuses if isinstance(status, int) and status >= 500 and status != 503], statuses
    assert statuses["503 with Retry-After"] == statuses[503]
