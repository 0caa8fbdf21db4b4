import pytest

from retrieval.fusion import rrf_fuse


def test_items_found_by_both_channels_rank_first():
    fused = rrf_fuse({"lexical": ["a", "b", "c"], "vector": ["c", "d", "a"]}, k=60)
    assert [item for item, _ in fused][:2] == ["a", "c"]
    assert dict(fused)["a"] == pytest.approx(1 / 61 + 1 / 63)


def test_a_single_channel_keeps_its_order():
    assert [item for item, _ in rrf_fuse({"vector": [3, 1, 2]})] == [3, 1, 2]


def test_ties_keep_first_seen_order_and_empty_input_is_empty():
    assert [item for item, _ in rrf_fuse({"a": ["x"], "b": ["y"]})] == ["x", "y"]
    assert rrf_fuse({}) == []


def test_k_below_one_is_refused():
    with pytest.raises(ValueError, match="k must be >= 1"):
        rrf_fuse({"a": [1]}, k=0)
