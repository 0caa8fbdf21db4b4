"""Long queries take turns: another web process holding the only slot makes a long query wait, then 503."""

import psycopg
import pytest
from django.db import connection

from access.scope import Scope
from kernel.errors import ApplicationError, Unavailable
from retrieval.admission import LOCK_NAMESPACE
from retrieval.search import Mode, chunks_search
from sources import services
from tests.factories import SkillFactory

pytestmark = pytest.mark.django_db(transaction=True)  # the other session must see committed rows


def test_a_long_query_waits_for_its_turn_and_a_short_one_does_not(settings):
    services.skill_index(
        skill_id=SkillFactory(slug="otter", body="# Otter\n\nThe otter holds hands while sleeping.\n").pk
    )
    settings.RAG_SEARCH_LONG_QUERY_WORDS = 5
    settings.RAG_SEARCH_LONG_QUERY_CONCURRENCY = 1
    settings.RAG_SEARCH_LONG_QUERY_WAIT_MS = 300
    long_query = "why does the otter hold hands while it is sleeping"
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    with psycopg.connect(**params, autocommit=True) as other_process:
        other_process.execute("SELECT pg_advisory_lock(%s, 0)", [LOCK_NAMESPACE])  # a long query running elsewhere
        with pytest.raises(ApplicationError) as refused:
            chunks_search(query=long_query, mode=Mode.LEXICAL, scope=Scope())
        assert isinstance(refused.value, Unavailable) and "more than 5 words waited 300 ms" in refused.value.message
        assert chunks_search(query="otter sleeping", mode=Mode.LEXICAL, scope=Scope())  # short: no turn to wait for
        other_process.execute("SELECT pg_advisory_unlock(%s, 0)", [LOCK_NAMESPACE])
    hits = chunks_search(query=long_query, mode=Mode.LEXICAL, scope=Scope())
    assert [hit.chunk.source.key for hit in hits] == ["skill:otter"]
    # The turn ended with the search: another session can take the slot at once.
    with psycopg.connect(**params, autocommit=True) as other_process:
        assert other_process.execute("SELECT pg_try_advisory_lock(%s, 0)", [LOCK_NAMESPACE]).fetchone()[0]
