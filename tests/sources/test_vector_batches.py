"""A job's vectors as batches any bulk worker process claims: exactly once into the index, also through a SIGKILL."""

import os
import signal

import psycopg
import pytest
from django.db import connection
from django.db.models.functions import Length

from sources import locks, pipeline, tasks
from sources.config import indexing_config
from sources.models import Chunk, IndexJob, JobStatus, Source, VectorBatch, WorkspaceRoot
from sources.pipeline import vectors
from sources.pipeline.vectors import Position, vectors_batches_progress, vectors_plan
from tests.conftest import index_root, running_worker, wait_for
from tests.openai_server import slow
from tests.tree import tree_make

pytestmark = pytest.mark.django_db


@pytest.fixture
def base(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    return tmp_path


def root_chunks(root: WorkspaceRoot):
    return Chunk.objects.filter(source__key=f"root:{root.pk}")


def other_session():
    """A second database session of the test database (its own advisory locks)."""
    params = connection.get_connection_params()
    keep = ("dbname", "user", "password", "host", "port")
    return psycopg.connect(**{key: params[key] for key in keep if params.get(key)}, autocommit=True)


def pending_job(base, files: int) -> tuple[WorkspaceRoot, IndexJob, Position]:
    """A root indexed, its chunks put back to pending as the words-first stage leaves them, and a running job whose
    vector batches the test plans at the root's one position."""
    directory = base / "repo"
    tree_make(directory, files=files)
    root = WorkspaceRoot.objects.create(name="repo", path=str(directory), cooldown_seconds=0)
    assert index_root(root).status == JobStatus.SUCCEEDED
    root_chunks(root).update(vector_pending=True, embedding=None)
    source = Source.objects.get(pk=root.source_id)
    job = IndexJob.objects.create(root=root, status=JobStatus.RUNNING, worker="test")
    return root, job, Position(source.pk, source.active_generation, source.embedding_model)


def test_a_batch_another_session_holds_is_left_to_it_and_claimed_once_that_session_is_gone(base):
    root, job, position = pending_job(base, files=12)
    chunks = root_chunks(root)
    assert vectors_plan(job.pk, [position], size=5) == VectorBatch.objects.filter(job=job).count() >= 2
    first, *rest = VectorBatch.objects.filter(job=job).order_by("pk")
    planned = [pk for batch in [first, *rest] for pk in batch.chunk_ids]
    assert sorted(planned) == sorted(chunks.values_list("pk", flat=True))  # each pending chunk in one batch
    # Longest first: a batch's texts are alike in length, and the last batches are the quickest.
    chars = dict(chunks.annotate(chars=Length("content")).values_list("pk", "chars"))
    assert [chars[pk] for pk in planned] == sorted((chars[pk] for pk in planned), reverse=True)

    holder = other_session()
    holder.execute("SELECT pg_advisory_lock(%s, %s)", [locks.BATCH_LOCKS, first.pk])
    try:
        stored = pipeline.vectors_fill(job.pk, config=indexing_config())  # a helper: what it can claim, then done
        assert stored == sum(len(batch.chunk_ids) for batch in rest)
        assert set(chunks.filter(vector_pending=True).values_list("pk", flat=True)) == set(first.chunk_ids)
        assert VectorBatch.objects.get(pk=first.pk).done_at is None
    finally:
        holder.close()  # its session ends, and its lock with it (as when a worker is killed)
    wait_for(lambda: locks.batch_lock_holder(first.pk) is None, timeout=30, what="the session to end")
    assert pipeline.vectors_fill(job.pk, config=indexing_config(), wait=True) == len(first.chunk_ids)
    assert not chunks.filter(vector_pending=True).exists() and not chunks.filter(embedding=None).exists()
    batches = VectorBatch.objects.filter(job=job)
    assert all(batch.done_at and batch.stored == len(batch.chunk_ids) and batch.attempts == 1 for batch in batches)


def test_a_worker_that_lost_its_claim_stores_nothing(base):
    root, job, position = pending_job(base, files=4)
    chunks = root_chunks(root)
    vectors_plan(job.pk, [position], size=1000, least=1000)
    batch = VectorBatch.objects.get(job=job)
    claims = vectors._Claims(job.pk)
    rows = claims.next()
    assert rows is not None and rows.batch_id == batch.pk and locks.batch_lock_holder(batch.pk) == locks.backend_pid()
    locks.batch_lock_release(batch.pk)  # as if its session had been ended and the batch claimed by another worker
    taker = other_session()
    try:
        taker.execute("SELECT pg_advisory_lock(%s, %s)", [locks.BATCH_LOCKS, batch.pk])
        vectors_of = vectors._start(rows, config=indexing_config()).result()
        assert vectors._store(rows, vectors_of, made="x") == 0
    finally:
        taker.close()
    assert chunks.filter(vector_pending=True).count() == chunks.count()
    assert VectorBatch.objects.get(pk=batch.pk).stored == 0


@pytest.mark.worker
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_roots_vectors_are_embedded_once_by_two_worker_processes_also_when_one_is_killed_mid_batch(
    base, openai_server
):
    # Every embedding request takes a moment, so both processes hold batches while the test looks.
    openai_server.fail_always("stand-in", slow(0.3))
    directory = base / "repo"
    tree_make(directory, files=160)
    root = WorkspaceRoot.objects.create(name="repo", path=str(directory))
    env = {
        "RAG_LLM_BASE_URL": openai_server.base_url,
        "RAG_LLM_MAX_RETRIES": "0",
        "RAG_EMBEDDING_MODEL": "api:stand-in@64",
        "RAG_EMBED_BATCH_SIZE": "8",
        "RAG_INDEX_FLUSH_CHUNKS": "16",
        "RAG_JOB_STALE_SECONDS": "3600",  # a takeover must not wait for a heartbeat to go stale
    }
    with running_worker("pair", pool="prefork", concurrency=2, queues="bulk", **env):
        job, _ = tasks.root_reindex_request(root_id=root.pk, trigger="test")

        def helper_batch():
            owner = IndexJob.objects.get(pk=job.pk).worker
            held = VectorBatch.objects.filter(job_id=job.pk, done_at__isnull=True).exclude(worker__in=["", owner])
            return owner and held.values_list("pk", "worker").first()

        killed_batch, helper = wait_for(helper_batch, timeout=120, what="a helper process to hold a batch")
        os.kill(int(helper.rpartition(":")[2]), signal.SIGKILL)
        done = wait_for(
            lambda: (j := IndexJob.objects.get(pk=job.pk)).status in (JobStatus.SUCCEEDED, JobStatus.FAILED) and j,
            timeout=300,
            what="the job",
        )
    assert done.status == JobStatus.SUCCEEDED, done.message
    assert done.attempt == 1  # the job's own process went on; only the helper died
    chunks = root_chunks(root)
    assert not chunks.filter(vector_pending=True).exists() and not chunks.filter(embedding=None).exists()
    batches = list(VectorBatch.objects.filter(job_id=job.pk))
    # Every chunk in exactly one batch, every batch stored once, and the job counted each vector once.
    assert sorted(pk for batch in batches for pk in batch.chunk_ids) == sorted(chunks.values_list("pk", flat=True))
    assert all(batch.done_at is not None and batch.stored == len(batch.chunk_ids) for batch in batches)
    assert done.chunks_embedded == sum(batch.stored for batch in batches) == chunks.count()
    taken_over = next(batch for batch in batches if batch.pk == killed_batch)
    assert taken_over.attempts == 2 and taken_over.worker != helper
    assert len({batch.worker for batch in batches}) >= 2  # the work was shared
    # The job's page says so.
    progress = vectors_batches_progress(job.pk)
    assert progress.total == progress.done == len(batches) and progress.workers >= 2 and progress.working == 0
