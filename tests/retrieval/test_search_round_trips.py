"""A search's database round trips: at most five, whatever the steps after fusion.

The session's first statement (settings, models, lexical statistics), BM25,
the vector query, the session's last (settings put back), the pool's rows.
The search runs in autocommit here, as a request runs it: every round trip
is a statement Django counts (no BEGIN or COMMIT of its own). In a caller's
transaction each channel adds a savepoint pair, counted below too.
"""

from dataclasses import replace

import pytest
from django.db import connection

from retrieval.config import SearchConfig
from retrieval.search import Mode, chunks_search
from sources import services
from tests.factories import SkillFactory

ROUND_TRIPS = 5

BODIES = {
    "deploy": "# Deploy\n\nShip the containers with docker compose.\n\n## Backups\n\nRun pg_dump every night.\n\n"
    "## Rollback\n\nRestore last night's pg_dump when a deploy goes wrong.\n",
    "cooking": "# Cooking\n\nBoil pasta in salted water for nine minutes.\n",
}


@pytest.fixture
def skills():
    for slug, body in BODIES.items():
        services.skill_index(skill_id=SkillFactory(slug=slug, body=body).pk)


def session_settings() -> tuple:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('statement_timeout'), current_setting('hnsw.ef_search', true), "
            "current_setting('hnsw.iterative_scan', true)"
        )
        return cursor.fetchone()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"group": True},
        {"group": True, "snippets": 2},
        {"mmr": True},
        {"rerank": True},
        {"group": True, "snippets": 2, "mmr": True, "rerank": True},
    ],
    ids=["hybrid", "group", "snippets", "mmr", "rerank", "all"],
)
def test_a_hybrid_search_makes_at_most_five_round_trips(skills, tiny_model, django_assert_max_num_queries, options):
    config = SearchConfig.from_settings()
    config = replace(config, rerank=replace(config.rerank, model=tiny_model, min_chars=0))
    chunks_search(query="restore a backup", config=config)  # the models load outside the count
    with django_assert_max_num_queries(ROUND_TRIPS):
        hits = chunks_search(query="restore a backup after a bad deploy", config=config, **options)
    assert hits and hits.warnings == []
    assert all(set(hit.channels) <= {"lexical", "vector"} for hit in hits)
    assert (hits[0].rerank is not None) == bool(options.get("rerank"))


@pytest.mark.django_db(transaction=True)
def test_the_search_puts_its_settings_back(skills):
    before = session_settings()
    for mode in Mode:
        chunks_search(query="boil pasta", mode=mode)
        assert session_settings() == before


@pytest.mark.django_db(transaction=True)
def test_searches_follow_each_other_in_a_new_session_before_and_after_pgvector_loads(skills):
    """A fresh connection's first searches: a setting reset before pgvector loaded must restore cleanly after.

    As on a new server: the first search sees no model yet (no vector query
    runs, so pgvector stays unloaded and the HNSW settings are placeholders),
    the next one does.
    """
    from access.scope import Scope

    connection.close()  # a new PostgreSQL session
    nothing = Scope(source_ids=(2**31 - 1,))
    for _ in range(2):
        assert not chunks_search(query="restore a backup", scope=nothing)
    for mode in (Mode.HYBRID, Mode.LEXICAL, Mode.HYBRID, Mode.VECTOR, Mode.HYBRID):
        assert chunks_search(query="restore a backup", mode=mode)


@pytest.mark.django_db
def test_in_a_callers_transaction_each_channel_adds_a_savepoint(skills, django_assert_num_queries):
    chunks_search(query="boil pasta")
    with django_assert_num_queries(ROUND_TRIPS + 2 * 2):
        assert chunks_search(query="boil pasta")
