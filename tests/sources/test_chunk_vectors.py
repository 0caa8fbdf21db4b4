from pathlib import Path

import numpy as np
import pytest
from django.db import connection

from sources.chunk_vectors import chunk_vectors_store
from sources.models import Chunk
from tests.conftest import index_root


def _postings(source_id: int) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT lexeme, chunk_id, tf, dl, impact FROM retrieval_posting WHERE source_id = %s ORDER BY 1, 2",
            [source_id],
        )
        return cursor.fetchall()


@pytest.fixture
def indexed(instant_encoder, readme_root):
    """The readme root with a few more files, indexed: chunks with vectors and postings."""
    for n in range(4):
        Path(readme_root.path, f"m{n}.py").write_text(f"def handler_{n}(request):\n    return {n}\n")
    index_root(readme_root)
    return readme_root


def test_each_chunk_gets_its_own_vector_exactly_and_its_words_stay_as_they_were(indexed):
    chunks = list(Chunk.objects.filter(source_id=indexed.source_id).order_by("pk"))
    postings = _postings(indexed.source_id)
    vectors = np.random.default_rng(0).standard_normal((len(chunks), 384)).astype(np.float32)
    Chunk.objects.filter(pk__in=[c.pk for c in chunks]).update(vector_pending=True)

    stored = chunk_vectors_store(ids=[c.pk for c in chunks], vectors=vectors, embedded_as="made-so")

    assert stored == len(chunks) >= 5
    for chunk, vector in zip(chunks, vectors, strict=True):
        chunk.refresh_from_db()
        assert np.array_equal(np.asarray(chunk.embedding, dtype=np.float32), vector)  # float32 both ways
        assert not chunk.vector_pending and chunk.embedded_as == "made-so"
        assert chunk.content  # the rest of the row is untouched
    assert _postings(indexed.source_id) == postings  # a vector is no change to the lexical index


def test_a_chunk_deleted_meanwhile_is_skipped(indexed):
    first, second = Chunk.objects.filter(source_id=indexed.source_id).order_by("pk")[:2]
    second.delete()
    vectors = np.ones((2, 384), dtype=np.float32)
    assert chunk_vectors_store(ids=[first.pk, second.pk], vectors=vectors, embedded_as="x") == 1
    assert not Chunk.objects.filter(pk=second.pk).exists()


@pytest.mark.django_db
def test_ids_and_vectors_must_pair_up():
    with pytest.raises(ValueError, match="2 chunk ids for 1 vectors"):
        chunk_vectors_store(ids=[1, 2], vectors=np.ones((1, 384), dtype=np.float32), embedded_as="x")
    assert chunk_vectors_store(ids=[], vectors=np.zeros((0, 384), dtype=np.float32), embedded_as="x") == 0
