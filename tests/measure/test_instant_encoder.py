import numpy as np
import pytest

from measure.instant_encoder import DIMENSIONS, instant_vector
from sources.ingest import embedded_text
from sources.models import Chunk
from tests.conftest import index_root


def test_a_root_indexed_with_the_instant_encoder_gets_each_chunk_the_vector_of_its_text(instant_encoder, readme_root):
    job = index_root(readme_root)
    chunks = list(Chunk.objects.filter(source=readme_root.source_id))
    assert job.status == "succeeded" and chunks
    for chunk in chunks:
        assert not chunk.vector_pending
        assert chunk.embedding_model.name == "instant@384" and chunk.embedding_model.provider == "api"
        text = embedded_text(
            path=chunk.path,
            symbol=chunk.symbol,
            context_prefix=chunk.context_prefix,
            description="",
            content=chunk.content,
        )
        # The server answers six decimals; the embedder normalises them again.
        assert np.dot(np.asarray(chunk.embedding), instant_vector(text)) > 0.9999


@pytest.mark.unit
def test_the_same_text_gets_the_same_unit_vector_and_another_text_another():
    a, b = instant_vector("def f(): pass"), instant_vector("def g(): pass")
    assert a.shape == (DIMENSIONS,) and abs(np.linalg.norm(a) - 1) < 1e-6
    assert np.array_equal(a, instant_vector("def f(): pass"))
    assert abs(float(np.dot(a, b))) < 0.3
