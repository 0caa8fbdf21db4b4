import math

import pytest

from measure.metrics import evaluate, mrr_at, ndcg_at, recall_at, token_overlap_rank, tokens

pytestmark = pytest.mark.unit


def test_ndcg_uses_linear_graded_gains_like_trec_eval():
    relevance = {"a": 3, "b": 1, "c": 0}
    assert ndcg_at(["a", "b"], relevance, 10) == pytest.approx(1.0)
    expected = (1 / math.log2(2) + 3 / math.log2(3)) / (3 / math.log2(2) + 1 / math.log2(3))
    assert ndcg_at(["b", "a"], relevance, 10) == pytest.approx(expected)
    assert ndcg_at(["x", "y"], relevance, 10) == 0.0


def test_recall_and_mrr():
    relevance = {"a": 2, "b": 1, "z": 0}
    assert recall_at(["x", "a", "z"], relevance, 10) == 0.5
    assert mrr_at(["x", "z", "b"], relevance, 10) == pytest.approx(1 / 3)
    assert mrr_at(["x"] * 10 + ["a"], relevance, 10) == 0.0


def test_queries_without_relevant_documents_are_skipped():
    report = evaluate({"q1": ["a"], "q2": ["b"]}, {"q1": {"a": 1}, "q2": {"b": 0}}, k=10)
    assert report == {"ndcg@10": 1.0, "recall@10": 1.0, "recall@100": 1.0, "mrr@10": 1.0}


def test_token_overlap_is_the_seed_scorer():
    documents = {"d1": tokens("Reset the admin password"), "d2": tokens("admin panel"), "d3": tokens("unrelated")}
    assert token_overlap_rank("How to reset admin password?", documents) == ["d1", "d2"]
