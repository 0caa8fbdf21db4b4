import numpy as np
import pytest

from measure.bench_corpus import bench_texts, mixed_vectors

pytestmark = pytest.mark.unit


def test_mixtures_are_seeded_unit_vectors_near_the_real_ones():
    rng = np.random.default_rng(1)
    real = rng.normal(size=(6, 16)).astype(np.float32)
    real /= np.linalg.norm(real, axis=1, keepdims=True)
    mixed = mixed_vectors(real, 50, seed=0)
    assert mixed.shape == (50, 16)
    assert np.allclose(np.linalg.norm(mixed, axis=1), 1.0, atol=1e-5)
    # each mixture is closer to its nearest real vector than random unit vectors are
    assert (mixed @ real.T).max(axis=1).mean() > 0.5
    assert np.array_equal(mixed, mixed_vectors(real, 50, seed=0))


def test_bench_texts_are_seeded_real_chunks_with_unique_positions():
    texts = bench_texts(300, seed=0)
    assert len(texts) == 300
    assert [t.path for t in texts] == [t.path for t in bench_texts(300, seed=0)]
    assert all(t.chunk.content.strip() and "/" in t.path for t in texts)
