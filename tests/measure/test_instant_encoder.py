import json
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command

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


@pytest.mark.django_db(transaction=True)  # the bench vacuums the chunk table, which no transaction may hold
def test_the_index_bench_with_the_instant_encoder_indexes_a_tree_through_the_pipeline(tmp_path, settings):
    tree = tmp_path / "tree"
    tree.mkdir()
    for n in range(3):
        (tree / f"m{n}.py").write_text(f"def f{n}():\n    return {n}\n")
    (tree / "README.md").write_text("# Tree\n\nThree modules.\n")
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    out = StringIO()
    call_command("rag_bench", "index", str(tree), "--encoder", "instant", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["model"] == "instant@384"
    assert report["files"] == 4 and report["chunks"] >= 4
    assert report["reverify_embedded"] == 0  # unchanged the second time
    assert not Chunk.objects.exists()  # the bench root is gone again
