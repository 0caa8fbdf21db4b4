"""The bench corpus's bulk load (measure/bench_bulk.py) ends where the product's own writes end."""

import pytest
from django.db import connection

from measure import bench_bulk
from measure.bench_corpus import bench_corpus_drop, bench_corpus_ensure

CHUNKS = 400


def lexical_index(source_id: int) -> tuple[list, list, list]:
    """The lexical tables' rows of one source, by chunk position rather than id (ids differ between builds)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT p.lexeme, c.chunk_index, p.tf, p.dl, p.impact FROM retrieval_posting p "
            "JOIN sources_chunk c ON c.id = p.chunk_id WHERE p.source_id = %s ORDER BY 1, 2",
            [source_id],
        )
        postings = cursor.fetchall()
        cursor.execute("SELECT lexeme, generation, df FROM retrieval_term WHERE source_id = %s ORDER BY 1", [source_id])
        terms = cursor.fetchall()
        cursor.execute(
            "SELECT generation, chunks, total_dl FROM retrieval_lexical_source WHERE source_id = %s", [source_id]
        )
        return postings, terms, cursor.fetchall()


def index_definitions() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename IN ('sources_chunk', 'retrieval_posting', "
            "'retrieval_term', 'retrieval_lexical_source')"
        )
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.django_db(transaction=True)  # VACUUM and the index builds run outside a transaction, as in the bench
def test_a_bulk_loaded_corpus_has_the_postings_and_indexes_the_triggers_and_live_indexes_give():
    through_triggers = bench_corpus_ensure(chunks=CHUNKS, embedded=32, log=lambda line: None)
    expected = lexical_index(through_triggers.source.pk)
    indexes = index_definitions()
    bench_corpus_drop()

    bulk = bench_corpus_ensure(chunks=CHUNKS, embedded=32, bulk_allowed=True, log=lambda line: None)

    assert bulk.built and {"postings", "indexes", "hnsw"} <= set(bulk.seconds)
    assert expected[0] and lexical_index(bulk.source.pk) == expected
    assert index_definitions() == indexes
    assert not bench_bulk.dropped_file().exists()


@pytest.mark.django_db(transaction=True)
def test_indexes_left_dropped_by_an_interrupted_build_come_back_before_the_next_one():
    bench_corpus_ensure(chunks=50, embedded=8, log=lambda line: None)
    indexes = index_definitions()
    bench_bulk.indexes_drop(log=lambda line: None)  # the build stops here
    assert index_definitions() < indexes

    bench_corpus_ensure(chunks=50, embedded=8, bulk_allowed=True, log=lambda line: None)

    assert index_definitions() == indexes


@pytest.mark.django_db
def test_disk_usage_reports_bytes_per_chunk_for_rows_hnsw_and_postings():
    bench_corpus_ensure(chunks=50, embedded=8, log=lambda line: None)

    disk = bench_bulk.disk_usage()

    assert disk["chunks_in_table"] >= 50
    per = disk["per_chunk_bytes"]
    assert per["chunk_table"] > 0 and per["hnsw"] > 0 and per["lexical_postings"] > 0
    assert per["database"] >= per["chunk_table"] + per["hnsw"] + per["lexical_postings"]
