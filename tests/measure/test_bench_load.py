import pytest

from measure.bench_load import Sample, database_url_for, percentile_ms, samples_summary, server_timing_parse
from measure.bench_queries import QueryKind

pytestmark = pytest.mark.unit


def test_server_timing_is_parsed_and_junk_is_ignored():
    assert server_timing_parse("embed;dur=4.5, lexical;dur=2, cache;desc=hit, bad;dur=x, ") == {
        "embed": 4.5,
        "lexical": 2.0,
    }
    assert server_timing_parse("") == {}


def test_percentiles_are_in_milliseconds_and_empty_lists_give_zero():
    assert percentile_ms([0.001 * i for i in range(1, 101)], 50) == pytest.approx(50.5)
    assert percentile_ms([], 95) == 0.0


def test_the_summary_counts_errors_apart_and_splits_the_time():
    timings = {"embed": 5.0, "embed_wait": 1.0, "lexical": 4.0, "vector": 2.0, "search": 9.0}
    samples = [Sample(QueryKind.QUESTION, "hybrid", 0.010, 200, 0, timings)] * 3 + [
        Sample(QueryKind.LONG, "hybrid", 0.5, 503, error="every channel failed"),
        Sample(QueryKind.COMMON, "hybrid", 0.010, 200, 1, timings),
    ]
    summary = samples_summary(samples, elapsed=2.0)
    assert (summary["requests"], summary["errors"], summary["warnings"], summary["qps"]) == (5, 1, 1, 2.0)
    assert summary["stages_ms"] == {
        "embed": 5.0,
        "embed_wait": 1.0,
        "lexical": 4.0,
        "vector": 2.0,
        "search_other": 2.0,
        "outside": 1.0,
        "client": 10.0,
    }
    assert set(summary["by_kind"]) == {"question", "long", "common"}
    assert summary["error_examples"] == ["503 every channel failed"]


def test_the_database_url_keeps_everything_but_the_name():
    url = "postgresql://postgres@%2Ftmp%2Fpg/rag_site?sslmode=disable"
    assert database_url_for(url, "test_rag_site") == "postgresql://postgres@%2Ftmp%2Fpg/test_rag_site?sslmode=disable"
