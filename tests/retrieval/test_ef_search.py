"""hnsw.ef_search per query: the configured value, at least the rows asked for, growing with the corpus."""

from dataclasses import replace

import pytest
from django.db import connection

from access.scope import Scope
from retrieval.config import SearchConfig
from retrieval.session import search_session
from retrieval.vector import EF_SEARCH_MAX, ef_search


@pytest.mark.unit
def test_ef_search_is_the_configured_value_or_the_rows_asked_for_up_to_the_scale_size():
    assert ef_search(configured=100, limit=50) == 100
    assert ef_search(configured=100, limit=300) == 300
    assert ef_search(configured=100, limit=50, chunks=100_000, scale_chunks=100_000) == 100
    assert ef_search(configured=100, limit=50, chunks=10**7, scale_chunks=0) == 100


@pytest.mark.unit
def test_ef_search_grows_with_the_square_root_of_the_corpus_past_the_scale_size_up_to_pgvectors_limit():
    assert ef_search(configured=100, limit=50, chunks=400_000, scale_chunks=100_000) == 200
    assert ef_search(configured=100, limit=50, chunks=1_000_000, scale_chunks=100_000) == 317
    assert ef_search(configured=100, limit=50, chunks=10**9, scale_chunks=100_000) == EF_SEARCH_MAX
    # asked for more rows than the limit allows: the rows asked for still win
    assert ef_search(configured=100, limit=1500, chunks=10**9, scale_chunks=100_000) == 1500


def session_ef_search(*, chunks: float, limit: int, config: SearchConfig) -> int:
    with connection.cursor() as cursor:
        # The planner's count of the chunk table, as ANALYZE would leave it (rolled back with the test).
        cursor.execute("UPDATE pg_class SET reltuples = %s WHERE oid = 'sources_chunk'::regclass", [chunks])
    with search_session(scope=Scope(), lexical_query=None, vector=True, limit=limit, config=config):
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('hnsw.ef_search')")
            return int(cursor.fetchone()[0])


@pytest.mark.django_db
@pytest.mark.parametrize("chunks", [-1, 5_000, 100_000, 250_000, 1_000_000, 3e9])
@pytest.mark.parametrize("limit", [50, 700])
def test_the_search_session_sets_the_ef_search_the_python_rule_gives(chunks, limit):
    config = replace(SearchConfig.from_settings(), hnsw_ef_search=100, hnsw_ef_search_scale_chunks=100_000)

    expected = ef_search(configured=100, limit=limit, chunks=chunks, scale_chunks=100_000)

    assert session_ef_search(chunks=chunks, limit=limit, config=config) == expected
