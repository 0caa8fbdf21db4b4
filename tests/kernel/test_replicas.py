"""Read replicas on real servers: the test session's embedded PostgreSQL and a streaming replica of it
(rag_site/embedded_replica.py), read through kernel/replicas.py's router."""

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.sessions.models import Session
from django.db import connection, connections, router

from access.keys import api_key_create
from access.models import ApiKey
from kernel.replicas import PRIMARY, ReplicaPool, ReplicaRouter, replica_pool, replica_reads
from measure.bench_load import Client
from measure.bench_queries import QueryKind
from measure.bench_replica import replica_outage
from rag_site.embedded_replica import replica_dir, replica_start, replica_stop, replicas_retire
from sources import services
from sources.models import Chunk, IndexJob, Memory, Skill
from tests.conftest import api_client, wait_for
from tests.factories import SkillFactory

ALIAS = "replica_1"
pytestmark = pytest.mark.django_db(transaction=True, databases=[PRIMARY, ALIAS])


def primary_data_dir() -> Path:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('data_directory')")
        return Path(cursor.fetchone()[0])


@pytest.fixture(scope="module")
def replica_server(django_db_setup, django_db_blocker) -> Iterator[Path]:
    """A streaming replica of the test session's PostgreSQL (cloned after the test database was made), configured
    as DATABASE_REPLICA_URLS would: a mirror to the test runner, which so neither creates nor flushes a database
    there (it is read-only); what the primary commits arrives by streaming replication.

    Module-scoped, so the alias exists before pytest-django checks the test's ``databases``.
    """
    with django_db_blocker.unblock():
        primary = primary_data_dir()
    data_dir = replica_dir(Path(os.environ["RAG_VAR_DIR"]), 1)
    replica_start(primary, data_dir, number=1)
    connections.settings[ALIAS] = {
        **connections[PRIMARY].settings_dict,
        "HOST": str(data_dir),
        "TEST": {**connections[PRIMARY].settings_dict["TEST"], "MIRROR": PRIMARY},
    }
    yield data_dir
    connections[ALIAS].close()
    del connections[ALIAS]
    del connections.settings[ALIAS]
    # Its slot would hold back the primary's VACUUM for the rest of the session.
    replica_stop(data_dir, mode="immediate")
    replicas_retire(data_dir.parent, primary, keep=0)


def replica_router(max_lag_seconds: float = 30.0) -> ReplicaRouter:
    # As rag_site/settings/base.py builds it.
    return ReplicaRouter(
        aliases=(ALIAS,),
        max_lag_seconds=max_lag_seconds,
        apps=("sources", "retrieval"),
        primary_models=("sources.IndexJob", "sources.Memory"),
    )


@pytest.fixture
def replica(replica_server, settings) -> Iterator[Path]:
    settings.DATABASE_ROUTERS = [replica_router()]
    yield replica_server
    replica_start(primary_data_dir(), replica_server, number=1)  # a test stopped it: back for the next


def replica_has(slug: str) -> bool:
    with connections[ALIAS].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM sources_chunk c JOIN sources_skill s ON s.source_id = c.source_id WHERE s.slug = %s",
            [slug],
        )
        return cursor.fetchone()[0] > 0


def skill_indexed(slug: str, body: str) -> None:
    services.skill_index(skill_id=SkillFactory(slug=slug, body=body).pk)


def search(client, query: str):
    return client.post("/api/v1/search", data=json.dumps({"query": query, "k": 3}), content_type="application/json")


class Statements:
    """The SQL each database received."""

    def __init__(self) -> None:
        self.by_alias: dict[str, list[str]] = {PRIMARY: [], ALIAS: []}

    def wrapper(self, alias: str):
        def capture(execute, sql, params, many, context):
            self.by_alias[alias].append(sql)
            return execute(sql, params, many, context)

        return capture


def test_a_search_reads_the_corpus_from_the_replica_and_the_api_key_from_the_primary(replica):
    skill_indexed("deploy", "# Deploy\n\nRun pg_dump every night to back up PostgreSQL.\n")
    wait_for(lambda: replica_has("deploy"), what="the replica to receive the skill")
    client = api_client()
    seen = Statements()
    with (
        connections[PRIMARY].execute_wrapper(seen.wrapper(PRIMARY)),
        connections[ALIAS].execute_wrapper(seen.wrapper(ALIAS)),
    ):
        response = search(client, "nightly database backup")
    assert response.status_code == 200
    assert response.json()["hits"][0]["source_key"] == "skill:deploy"
    assert any("sources_chunk" in sql for sql in seen.by_alias[ALIAS])
    assert not any("sources_chunk" in sql for sql in seen.by_alias[PRIMARY])
    # Keys, grants, users and sessions: a key just made, a grant just revoked must count at once.
    assert not any(table in sql for sql in seen.by_alias[ALIAS] for table in ("access_", "auth_", "django_session"))


def test_inside_replica_reads_writes_and_jobs_and_memories_use_the_primary(replica):
    with replica_reads():
        assert router.db_for_read(Chunk) == ALIAS
        assert router.db_for_read(IndexJob) == PRIMARY
        assert router.db_for_read(Memory) == PRIMARY
        assert router.db_for_read(ApiKey) == PRIMARY
        assert router.db_for_read(Session) == PRIMARY
        assert router.db_for_write(Skill) == PRIMARY
        # The replica is read-only: the write would fail there.
        Skill.objects.create(slug="written-inside", body="# Written\n\ninside a replica block\n")
    assert Skill.objects.filter(slug="written-inside").exists()
    assert router.db_for_read(Chunk) == PRIMARY  # outside the block


def test_a_replica_that_lags_too_far_is_skipped_and_searches_see_the_primary(replica, settings):
    settings.DATABASE_ROUTERS = [replica_router(max_lag_seconds=0.5)]
    with connections[ALIAS].cursor() as cursor:
        cursor.execute("SELECT pg_wal_replay_pause()")
    try:
        skill_indexed("cooking", "# Cooking\n\nBoil pasta in salted water for nine minutes.\n")
        time.sleep(1.0)  # the replica replays nothing meanwhile: it is now more than 0.5 s behind
        state = replica_pool().state(ALIAS, fresh=True)
        assert not state.readable
        assert "lags" in state.reason
        assert not replica_has("cooking")
        response = search(api_client(), "pasta water")
        assert response.json()["hits"][0]["source_key"] == "skill:cooking"
        health = api_client(can_manage=True).get("/api/v1/health").json()
        assert health["checks"]["replicas"]["ok"] is False
        assert "lags" in health["checks"]["replicas"]["details"]["error"]
    finally:
        with connections[ALIAS].cursor() as cursor:
            cursor.execute("SELECT pg_wal_replay_resume()")
    wait_for(lambda: replica_pool().state(ALIAS, fresh=True).readable, what="the replica to catch up")


def test_a_replica_that_stops_between_searches_is_skipped_without_a_failed_search(replica):
    skill_indexed("deploy", "# Deploy\n\nRun pg_dump every night to back up PostgreSQL.\n")
    wait_for(lambda: replica_has("deploy"), what="the replica to receive the skill")
    client = api_client()
    assert search(client, "nightly database backup").status_code == 200  # reads the replica, which is kept open
    assert replica_pool().state(ALIAS).readable
    replica_stop(replica, mode="immediate")
    # The pool still believes the replica readable (checked less than 5 s ago): the search finds its kept
    # connection dead, marks the replica down and runs again on the primary.
    response = search(client, "nightly database backup")
    assert response.status_code == 200
    assert response.json()["hits"][0]["source_key"] == "skill:deploy"
    assert not replica_pool().state(ALIAS).readable
    health = api_client(can_manage=True).get("/api/v1/health")
    assert health.status_code == 200  # not critical: searches read the primary
    assert "unreachable" in health.json()["checks"]["replicas"]["details"]["error"]
    replica_start(primary_data_dir(), replica, number=1)
    assert replica_pool().state(ALIAS, fresh=True).readable


@pytest.mark.slow
def test_stopping_the_replica_under_eight_searching_clients_fails_no_search(replica, live_server):
    skill_indexed("deploy", "# Deploy\n\nRun pg_dump every night to back up PostgreSQL.\n")
    wait_for(lambda: replica_has("deploy"), what="the replica to receive the skill")
    _, key = api_key_create(name="rag-bench", rate_limit_per_minute=0)
    # Warmed up first, as the bench does: the first search loads the model, which would outlast the outage.
    warm = Client(live_server.url, key)
    assert warm.search(QueryKind.QUESTION, "nightly database backup", "hybrid").status == 200
    warm.close()
    assert replica_pool().state(ALIAS).readable
    report = replica_outage(
        url=live_server.url, key=key, primary_dir=primary_data_dir(), data_dir=replica, seconds=15.0, log=print
    )
    assert report["clients"] == 8
    assert report["requests"] > 8
    assert report["errors"] == 0, report.get("error_examples")


def checks(seen: Statements) -> int:
    # Not the connection's own set-up queries (pgvector's type look-ups).
    return sum("pg_is_in_recovery" in sql for sql in seen.by_alias[ALIAS])


def test_a_replica_is_checked_once_per_period_not_per_request(replica):
    now = [0.0]
    pool = ReplicaPool((ALIAS,), max_lag_seconds=30.0, recheck_seconds=5.0, clock=lambda: now[0])
    seen = Statements()
    with connections[ALIAS].execute_wrapper(seen.wrapper(ALIAS)):
        chosen = {pool.choose() for _ in range(20)}
        now[0] = 4.9
        pool.choose()
        assert checks(seen) == 1
        now[0] = 5.0
        pool.choose()
        assert checks(seen) == 2
    assert chosen == {ALIAS}


def replication_slots() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT slot_name FROM pg_replication_slots")
        return {row[0] for row in cursor.fetchall()}


def test_a_retired_replica_gives_its_slot_back_and_its_copy_is_deleted(replica_server):
    second = replica_dir(replica_server.parent, 2)
    replica_start(primary_data_dir(), second, number=2)
    assert {"rag_replica_1", "rag_replica_2"} <= replication_slots()
    replicas_retire(replica_server.parent, primary_data_dir(), keep=0)  # running (a bench's, say): left alone
    assert {"rag_replica_1", "rag_replica_2"} <= replication_slots() and second.exists()
    replica_stop(second, mode="immediate")  # as make run stops its own at exit

    replicas_retire(replica_server.parent, primary_data_dir(), keep=1)  # RAG_EMBEDDED_REPLICAS lowered from 2 to 1

    assert "rag_replica_2" not in replication_slots() and not second.exists()
    assert "rag_replica_1" in replication_slots() and (replica_server / "PG_VERSION").exists()
