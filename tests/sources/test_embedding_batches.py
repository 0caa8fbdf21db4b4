"""Embedding reports after every batch, so a long embedding call keeps its job's heartbeat fresh."""

import threading

import numpy as np
import pytest

from sources import jobs, pipeline
from sources.embedding import EmbeddingError, embedder_for
from sources.models import Chunk, IndexedFile, WorkspaceRoot
from sources.pipeline import vectors
from tests.conftest import index_root


@pytest.mark.unit
def test_every_batch_is_reported_and_the_vectors_are_those_of_one_encode_call():
    embedder = embedder_for(provider="local", name="all-MiniLM-L6-v2")
    texts = [f"note {i}: " + "word " * (i % 7) for i in range(23)]
    reports = []
    vectors = embedder.embed(texts, batch_size=5, on_batch=lambda: reports.append(1))
    assert len(reports) == 5  # ceil(23 / 5)
    whole = embedder._load().encode(texts, batch_size=5, convert_to_numpy=True, normalize_embeddings=True)
    assert np.allclose(vectors, whole, atol=1e-5)


@pytest.mark.django_db
def test_a_job_beats_inside_one_long_embedding_call(tmp_path, settings, monkeypatch):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    settings.RAG_EMBED_BATCH_SIZE = 4
    settings.RAG_INDEX_FLUSH_CHUNKS = 10_000  # every chunk in one embedding call
    monkeypatch.setattr(pipeline.run, "_HEARTBEAT_SECONDS", 0.0)  # beat whenever asked
    directory = tmp_path / "repo"
    directory.mkdir()
    for i in range(12):
        (directory / f"m{i}.py").write_text(f"def f{i}():\n    return {i}\n")
    beats, during_embedding = [], []
    progress, fill = jobs.job_progress, pipeline.run.vectors_fill
    monkeypatch.setattr(jobs, "job_progress", lambda job, **kw: (beats.append(1), progress(job, **kw)))

    def vectors_fill(positions, **kwargs):
        before = len(beats)
        done = fill(positions, **kwargs)
        during_embedding.append(len(beats) - before)
        return done

    monkeypatch.setattr(pipeline.run, "vectors_fill", vectors_fill)
    job = index_root(WorkspaceRoot.objects.create(name="repo", path=str(directory)))
    assert job.status == "succeeded" and job.chunks_embedded == 12
    assert during_embedding == [3]  # 12 chunks in batches of 4: one beat after each


def _files(tmp_path, settings, count: int):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    directory = tmp_path / "repo"
    directory.mkdir()
    for i in range(count):
        (directory / f"m{i:02}.py").write_text(f"def f{i}():\n    return {i}\n")
    return WorkspaceRoot.objects.create(name="repo", path=str(directory))


class _Recorded:
    """The real embedder, each call's thread recorded; ``fail_at``: the call (from 1) that fails as a model can."""

    def __init__(self, monkeypatch, *, fail_at: int = 0) -> None:
        self.threads: list[str] = []
        self.fail_at = fail_at
        real = vectors.embedder_for

        def embedder_for(**kwargs):
            embedder = real(**kwargs)
            recorded = self

            class Embedder:
                def embed(self, texts, **options):
                    recorded.threads.append(threading.current_thread().name)
                    if len(recorded.threads) == recorded.fail_at:
                        raise EmbeddingError("the encoder ran out of memory")
                    return embedder.embed(texts, **options)

            return Embedder()

        monkeypatch.setattr(vectors, "embedder_for", embedder_for)


@pytest.mark.django_db
def test_the_vectors_stage_embeds_batch_by_batch_on_the_encoder_thread(tmp_path, settings, monkeypatch):
    settings.RAG_INDEX_FLUSH_CHUNKS = settings.RAG_EMBED_BATCH_SIZE = 3  # twelve one-chunk files: four batches
    root = _files(tmp_path, settings, 12)
    recorded = _Recorded(monkeypatch)
    job = index_root(root)
    assert job.status == "succeeded" and (job.chunks_written, job.chunks_embedded) == (12, 12)
    assert len(recorded.threads) == 4 and all(name.startswith("rag-encoder") for name in recorded.threads)
    assert Chunk.objects.filter(source__root=root, vector_pending=False).count() == 12
    assert IndexedFile.objects.filter(source__root=root).count() == 12


@pytest.mark.django_db
def test_an_embedding_that_fails_on_the_encoder_thread_fails_the_job_and_the_next_embeds_only_what_waits(
    tmp_path, settings, monkeypatch
):
    settings.RAG_INDEX_FLUSH_CHUNKS = settings.RAG_EMBED_BATCH_SIZE = 3
    root = _files(tmp_path, settings, 12)
    _Recorded(monkeypatch, fail_at=3)
    failed = index_root(root, force=False)
    assert failed.status == "failed" and "ran out of memory" in failed.message
    # Every file is written and searchable by its words; the two batches before the failing one have their vectors.
    assert IndexedFile.objects.filter(source__root=root).count() == 12
    assert Chunk.objects.filter(source__root=root, vector_pending=False).count() == 6
    assert Chunk.objects.filter(source__root=root, vector_pending=True, embedding__isnull=True).count() == 6

    monkeypatch.undo()
    again = index_root(root, force=False)
    assert again.status == "succeeded" and again.files_unchanged == 12
    assert again.chunks_embedded == 6  # the rest, nothing twice
    assert not Chunk.objects.filter(source__root=root, vector_pending=True).exists()
