"""Index jobs: who runs them (the root's advisory lock), takeover when a worker is gone, hung workers."""

import contextlib
import os
import socket
import threading
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from kernel.errors import ApplicationError
from sources import jobs, locks, pipeline
from sources.models import IndexJob, JobStatus, WorkspaceRoot

pytestmark = pytest.mark.django_db


@pytest.fixture
def root(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    settings.RAG_JOB_STALE_SECONDS = 3600  # nothing here waits for a heartbeat to go stale
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "a.py").write_text("def a():\n    return 1\n")
    return WorkspaceRoot.objects.create(name="repo", path=str(tmp_path / "repo"), cooldown_seconds=0)


@contextlib.contextmanager
def other_session():
    """A second, real PostgreSQL session: another worker, as the database sees it."""
    url = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/" + connection.settings_dict["NAME"]
    with psycopg.connect(url, autocommit=True) as conn:
        yield conn


def running_under(job: IndexJob, worker: str, *, heartbeat_age: float = 0) -> None:
    IndexJob.objects.filter(pk=job.pk).update(
        status=JobStatus.RUNNING, worker=worker, heartbeat_at=timezone.now() - timedelta(seconds=heartbeat_age)
    )


def test_a_job_claimed_by_a_live_worker_is_not_run_twice(root):
    job, _ = jobs.root_job_request(root_id=root.pk)
    assert jobs.job_start(job_id=job.pk) is not None
    assert jobs.job_start(job_id=job.pk) is None  # a redelivered message while it runs
    assert pipeline.root_index(job=IndexJob.objects.get(pk=job.pk)) == JobStatus.SUCCEEDED
    assert jobs.job_start(job_id=job.pk) is None  # and after it finished
    assert locks.root_lock_holder(root.pk) is None  # the run released the root


def test_a_redelivered_task_takes_over_a_job_whose_worker_is_gone(root):
    job, _ = jobs.root_job_request(root_id=root.pk)
    running_under(job, "gone-host:4242")  # a fresh heartbeat, but nobody holds the root
    taken = jobs.job_start(job_id=job.pk)
    assert taken is not None and (taken.attempt, taken.worker) == (2, jobs.worker_name())
    assert "gone-host:4242" in taken.message and "taken over" in taken.message
    assert pipeline.root_index(job=taken) == JobStatus.SUCCEEDED
    job.refresh_from_db()
    assert (job.status, job.attempt, job.files_changed) == (JobStatus.SUCCEEDED, 2, 1)


def test_a_job_whose_worker_holds_the_root_is_left_to_it(root):
    job, _ = jobs.root_job_request(root_id=root.pk)
    running_under(job, "busy-host:1", heartbeat_age=600)  # slow, but alive: its session holds the lock
    with other_session() as worker:
        assert worker.execute("SELECT pg_try_advisory_lock(%s, %s)", [locks.ROOT_LOCKS, root.pk]).fetchone()[0]
        assert jobs.job_start(job_id=job.pk) is None
        assert jobs.jobs_reap() == []
        job.refresh_from_db()
        assert (job.status, job.attempt, job.worker) == (JobStatus.RUNNING, 1, "busy-host:1")


def test_the_sweep_queues_a_job_whose_worker_is_gone_again_at_once(root):
    job, _ = jobs.root_job_request(root_id=root.pk)
    running_under(job, "gone-host:7")
    assert jobs.jobs_reap() == [job.pk]  # RAG_JOB_STALE_SECONDS is an hour: the lock alone decided
    job.refresh_from_db()
    assert (job.status, job.attempt, job.worker) == (JobStatus.QUEUED, 2, "")
    assert "gone-host:7" in job.message and "attempt 2 of 3" in job.message
    started = jobs.job_start(job_id=job.pk)
    assert started is not None and started.attempt == 2  # queued again, not taken over twice
    pipeline.root_index(job=started)


def test_a_hung_worker_loses_its_session_and_its_job(root):
    job, _ = jobs.root_job_request(root_id=root.pk)
    running_under(job, "hung-host:3", heartbeat_age=120)
    with other_session() as hung:
        hung.execute("SELECT pg_advisory_lock(%s, %s)", [locks.ROOT_LOCKS, root.pk])
        assert jobs.jobs_reap(stale_after=60) == [job.pk]
        with pytest.raises(psycopg.OperationalError):
            hung.execute("SELECT 1")  # its session was ended, and the lock with it
    assert locks.root_lock_holder(root.pk) is None
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED and "no progress for 120 s" in job.message


def test_a_job_whose_workers_keep_dying_fails_for_good(root, settings):
    settings.RAG_JOB_MAX_ATTEMPTS = 2
    job, _ = jobs.root_job_request(root_id=root.pk)
    running_under(job, "gone-host:1")
    assert jobs.jobs_reap() == [job.pk]
    running_under(job, "gone-host:2")
    assert jobs.jobs_reap() == []
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and "2 attempt(s)" in job.message and "gone-host:2" in job.message


def test_a_worker_the_job_was_taken_from_cannot_write_to_it(root):
    job, _ = jobs.root_job_request(root_id=root.pk)
    mine = jobs.job_start(job_id=job.pk)
    IndexJob.objects.filter(pk=job.pk).update(worker="new-owner:9")  # handed on while this one stalled
    with pytest.raises(ApplicationError, match="no longer this worker's"):
        jobs.job_progress(mine)
    jobs.job_finish(job_id=job.pk, status=JobStatus.FAILED, message="stale verdict", job=mine)
    job.refresh_from_db()
    assert (job.status, job.worker, job.message) == (JobStatus.RUNNING, "new-owner:9", "")
    locks.root_lock_release(root.pk)


def test_a_redelivered_task_waits_a_moment_for_the_session_of_a_process_that_died_here(root):
    job, _ = jobs.root_job_request(root_id=root.pk)
    running_under(job, f"{socket.gethostname()}:99999999")  # a pool child of this host, killed a moment ago
    with other_session() as lingering:  # ... whose session PostgreSQL has not closed yet
        lingering.execute("SELECT pg_advisory_lock(%s, %s)", [locks.ROOT_LOCKS, root.pk])
        threading.Timer(0.5, lingering.close).start()
        taken = jobs.job_start(job_id=job.pk)
    assert taken is not None and taken.attempt == 2
    locks.root_lock_release(root.pk)
