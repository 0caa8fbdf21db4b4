import pytest

from retrieval.fusion import rrf_fuse

pytestmark = pytest.mark.unit


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


def test_weights_apply_per_channel_family():
    from retrieval.fusion import rrf_fuse

    fused = rrf_fuse({"lexical": ["a"], "vector:7": ["b"]}, k=60, weights={"lexical": 0.3})
    assert [item for item, _ in fused] == ["b", "a"]
    assert dict(fused)["a"] == pytest.approx(0.3 / 61)


def test_convex_fusion_keeps_cosine_and_scales_lexical_by_its_top_score():
    from retrieval.fusion import convex_fuse

    fused = dict(
        convex_fuse(
            {"lexical": [("a", 8.0), ("b", 2.0)], "vector:3": [("b", 0.9), ("c", 0.5)]}, weights={"lexical": 0.5}
        )
    )
    # a: 0.5 * 8/8; b: 0.5 * 2/8 + 0.9 (cosine as is); c: 0.5.
    assert fused == pytest.approx({"a": 0.5, "b": 1.025, "c": 0.5})
    assert convex_fuse({"vector": [("x", 0.4)]}) == [("x", 0.4)]
    assert convex_fuse({"lexical": [("x", 0.0)]}) == [("x", 1.0)]  # no span: the lone match counts fully
    assert convex_fuse({}) == []


def test_minmax_fusion_stretches_every_channel_to_its_candidates():
    from retrieval.fusion import convex_fuse

    fused = dict(
        convex_fuse(
            {"lexical": [("a", 8.0), ("b", 2.0)], "vector": [("b", 0.9), ("c", 0.5)]},
            weights={"lexical": 0.5},
            minmax=True,
        )
    )
    assert fused == pytest.approx({"a": 0.5, "b": 1.0, "c": 0.0})


def test_an_unknown_fusion_method_lists_the_valid_ones():
    from retrieval.choices import FusionMethod

    with pytest.raises(ValueError, match="valid: convex, minmax, rrf"):
        FusionMethod.parse("borda")


def test_mmr_demotes_near_duplicates_and_keeps_the_best_first():
    import numpy as np

    from retrieval.mmr import mmr_order

    vectors = {
        "a": np.array([1.0, 0.0]),
        "a2": np.array([0.99, 0.01]),
        "b": np.array([0.0, 1.0]),
        "c": np.array([-1.0, 0.0]),
    }
    ranked = [("a", 0.9), ("a2", 0.89), ("b", 0.8), ("c", 0.5)]
    assert [item for item, _ in mmr_order(ranked, vectors, lambda_=0.7, k=4)] == ["a", "b", "a2", "c"]
    assert [item for item, _ in mmr_order(ranked, vectors, lambda_=1.0, k=4)] == ["a", "a2", "b", "c"]
    assert mmr_order(ranked, {}, k=2) == [("a", 0.9), ("a2", 0.89)]
    with pytest.raises(ValueError, match="between 0 and 1"):
        mmr_order(ranked, vectors, lambda_=1.5)
