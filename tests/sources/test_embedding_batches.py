"""Embedding reports after every batch, so a long embedding call keeps its job's heartbeat fresh."""

import threading

import numpy as np
import pytest

from sources import ingest, jobs, pipeline
from sources.embedding import embedder_for
from sources.models import Chunk, IndexedFile, WorkspaceRoot
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
    settings.RAG_INDEX_FLUSH_CHUNKS = 10_000  # every file in one embedding call
    monkeypatch.setattr(pipeline.run, "_HEARTBEAT_SECONDS", 0.0)  # beat whenever asked
    directory = tmp_path / "repo"
    directory.mkdir()
    for i in range(12):
        (directory / f"m{i}.py").write_text(f"def f{i}():\n    return {i}\n")
    beats, during_embedding = [], []
    progress, embed = jobs.job_progress, ingest.documents_embed
    monkeypatch.setattr(jobs, "job_progress", lambda job, **kw: (beats.append(1), progress(job, **kw)))

    def documents_embed(documents, **kwargs):
        before = len(beats)
        embed(documents, **kwargs)
        during_embedding.append(len(beats) - before)

    monkeypatch.setattr(ingest, "documents_embed", documents_embed)
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


@pytest.mark.django_db
def test_flushes_embed_on_the_encoder_thread_while_the_indexer_reads_on(tmp_path, settings, monkeypatch):
    settings.RAG_INDEX_FLUSH_CHUNKS = 3  # twelve one-chunk files: four flushes
    root = _files(tmp_path, settings, 12)
    threads, vectors = [], ingest.documents_vectors

    def documents_vectors(documents, **kwargs):
        threads.append(threading.current_thread().name)
        return vectors(documents, **kwargs)

    monkeypatch.setattr(ingest, "documents_vectors", documents_vectors)
    job = index_root(root)
    assert job.status == "succeeded" and job.chunks_embedded == 12
    assert len(threads) == 4 and all(name.startswith("rag-encoder") for name in threads)
    assert Chunk.objects.filter(source__root=root).count() == 12
    assert IndexedFile.objects.filter(source__root=root).count() == 12


@pytest.mark.django_db
def test_an_embedding_that_fails_on_the_encoder_thread_fails_the_job_and_only_written_files_count_as_indexed(
    tmp_path, settings, monkeypatch
):
    settings.RAG_INDEX_FLUSH_CHUNKS = 3
    root = _files(tmp_path, settings, 12)
    calls, vectors = [], ingest.documents_vectors

    def documents_vectors(documents, **kwargs):
        calls.append(len(documents))
        if len(calls) == 3:
            raise ingest.IndexingError("the encoder ran out of memory")
        return vectors(documents, **kwargs)

    monkeypatch.setattr(ingest, "documents_vectors", documents_vectors)
    failed = index_root(root, force=False)
    assert failed.status == "failed" and "ran out of memory" in failed.message
    written = set(Chunk.objects.filter(source__root=root).values_list("path", flat=True))
    assert set(IndexedFile.objects.filter(source__root=root).values_list("path", flat=True)) == written
    assert len(written) == 6  # the two flushes before the failing one

    monkeypatch.undo()
    again = index_root(root, force=False)
    assert again.status == "succeeded" and again.chunks_embedded == 6  # the rest, nothing twice
    assert Chunk.objects.filter(source__root=root).count() == 12
