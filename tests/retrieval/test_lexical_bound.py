"""The stop rule's bound: no posting scores more than the bound of its own impact, at any average length."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval.lexical import BM25_B, BM25_K1, REFERENCE_LENGTH, impact_bound

pytestmark = pytest.mark.unit


def tf_part(tf: float, dl: int, length: float) -> float:
    return tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * dl / length))


@given(
    tf=st.integers(min_value=1, max_value=400),
    dl=st.integers(min_value=1, max_value=5000),
    average=st.floats(min_value=1.0, max_value=2000.0),
)
def test_no_posting_scores_more_than_the_bound_of_its_impact(tf, dl, average):
    impact = tf_part(tf, dl, REFERENCE_LENGTH)
    assert tf_part(tf, dl, average) <= impact_bound(impact, average_length=average)


@given(
    low=st.floats(min_value=0.01, max_value=2.19),
    high=st.floats(min_value=0.01, max_value=2.19),
    average=st.floats(1, 2000),
)
def test_a_lower_impact_never_has_a_higher_bound(low, high, average):
    # Postings are read best impact first: the last one read bounds every one after it.
    low, high = min(low, high), max(low, high)
    assert impact_bound(low, average_length=average) <= impact_bound(high, average_length=average)
