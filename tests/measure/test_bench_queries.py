from itertools import islice

import pytest

from measure.bench_queries import LONG_CHARS, MIX, QueryKind, long_query, queries_of, query_stream

pytestmark = pytest.mark.unit


def test_the_query_stream_is_the_same_for_the_same_seed():
    assert list(islice(query_stream(seed=3), 50)) == list(islice(query_stream(seed=3), 50))
    assert list(islice(query_stream(seed=3), 50)) != list(islice(query_stream(seed=4), 50))


def test_the_stream_draws_every_kind_and_only_the_kinds_asked_for():
    assert {kind for kind, _ in islice(query_stream(seed=0), 2000)} == set(MIX)
    assert {kind for kind, _ in islice(query_stream(seed=0, kinds=(QueryKind.QUESTION,)), 50)} == {QueryKind.QUESTION}


@pytest.mark.parametrize("seed", range(5))
def test_a_long_query_fills_the_api_limit_without_passing_it(seed):
    query = long_query(seed)
    assert LONG_CHARS - 20 < len(query) <= LONG_CHARS
    assert query == query.strip()


def test_every_query_is_short_enough_for_the_api():
    assert all(0 < len(q) <= LONG_CHARS for kind in QueryKind for q in queries_of(kind))


def test_an_unknown_kind_names_the_valid_ones():
    with pytest.raises(ValueError, match="valid kinds: question, identifier"):
        QueryKind.parse("poetry")
