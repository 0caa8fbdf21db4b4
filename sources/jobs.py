"""Index jobs: requested once per root at a time, visible while they run,
failed with a reason when their worker dies."""

import logging
import os
import socket
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from rag_site.errors import ApplicationError
from sources.models import IndexJob, JobStatus, WorkspaceRoot
from sources.models_roots import ACTIVE_JOB_STATUSES

log = logging.getLogger(__name__)

MAX_ERRORS_KEPT = 100


def root_reindex_request(*, root_id: int, force: bool = False, trigger: str = "admin", attempt: int = 1) -> tuple[IndexJob, bool]:
    """Queue a job for the root, or return the one already queued or running.

    Returns ``(job, created)``. Without ``force`` a root verified less than
    its cooldown ago is refused with the time left.
    """
    root = WorkspaceRoot.objects.filter(pk=root_id).first()
    if root is None:
        raise ApplicationError(f"workspace root {root_id} does not exist", status=404)
    if not root.enabled:
        raise ApplicationError(f"workspace root {root.name!r} is disabled; enable it first", status=409)
    active = IndexJob.objects.filter(root=root, status__in=ACTIVE_JOB_STATUSES).first()
    if active is not None:
        return active, False
    if not force and root.last_verified_at is not None:
        elapsed = (timezone.now() - root.last_verified_at).total_seconds()
        if elapsed < root.cooldown_seconds:
            raise ApplicationError(
                f"root {root.name!r} was verified {elapsed:.0f} s ago; its cooldown is {root.cooldown_seconds} s "
                "(use force to re-index now)",
                status=429,
                details={"retry_after_seconds": round(root.cooldown_seconds - elapsed)},
            )
    try:
        with transaction.atomic():
            job = IndexJob.objects.create(root=root, force=force, trigger=trigger, attempt=attempt)
    except IntegrityError:
        # Another request won the race; the partial unique index says so.
        return IndexJob.objects.get(root=root, status__in=ACTIVE_JOB_STATUSES), False
    _enqueue(job.pk)
    return job, True


def _enqueue(job_id: int) -> None:
    def send() -> None:
        from sources.tasks import root_index_task

        try:
            root_index_task.delay(job_id)
        except Exception as exc:  # noqa: BLE001 - the broker may be down: say so on the job
            job_finish(job_id=job_id, status=JobStatus.FAILED, message=f"could not queue the job (is the broker running?): {exc}")

    transaction.on_commit(send)


def job_start(*, job_id: int) -> IndexJob | None:
    """Claim the job for this process; None when it is finished or claimed by a live worker."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.RAG_JOB_STALE_SECONDS)
    with transaction.atomic():
        job = IndexJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None or job.status not in ACTIVE_JOB_STATUSES:
            return None  # done, cancelled or deleted: a redelivered task has nothing to do
        if job.status == JobStatus.RUNNING and job.heartbeat_at and job.heartbeat_at > stale:
            return None
        job.status = JobStatus.RUNNING
        job.started_at = job.started_at or now
        job.heartbeat_at = now
        job.worker = f"{socket.gethostname()}:{os.getpid()}"
        job.save(update_fields=["status", "started_at", "heartbeat_at", "worker"])
    return job


def job_progress(job: IndexJob, **counters: int) -> None:
    """Save counters and the heartbeat (one UPDATE)."""
    for name, value in counters.items():
        setattr(job, name, value)
    job.heartbeat_at = timezone.now()
    job.errors = job.errors[:MAX_ERRORS_KEPT]
    IndexJob.objects.filter(pk=job.pk).update(heartbeat_at=job.heartbeat_at, errors=job.errors, **_counters(job))


def job_finish(*, job_id: int, status: str, message: str = "", job: IndexJob | None = None) -> None:
    """Record the outcome, once: a job already failed by the reaper keeps that verdict."""
    fields = {"status": status, "message": message[:4000], "finished_at": timezone.now(), "heartbeat_at": timezone.now()}
    if job is not None:
        fields.update(_counters(job), errors=job.errors[:MAX_ERRORS_KEPT])
    IndexJob.objects.filter(pk=job_id, status__in=ACTIVE_JOB_STATUSES).update(**fields)


def _counters(job: IndexJob) -> dict[str, int]:
    names = ["files_total", "files_seen", "files_changed", "files_unchanged", "files_skipped", "files_failed",
             "files_deleted", "chunks_embedded", "chunks_deleted"]
    return {name: getattr(job, name) for name in names}


def jobs_reap(*, stale_after: int | None = None) -> list[int]:
    """Fail running jobs whose worker stopped reporting, and start them again.

    A worker killed mid-job cannot say so; its job would stay "running"
    forever. Indexing is idempotent per file, so the next attempt finishes
    the work without duplicates.
    """
    cutoff = timezone.now() - timedelta(seconds=stale_after if stale_after is not None else settings.RAG_JOB_STALE_SECONDS)
    reaped = []
    for job in IndexJob.objects.filter(status=JobStatus.RUNNING, heartbeat_at__lt=cutoff).select_related("root"):
        silent = (timezone.now() - job.heartbeat_at).total_seconds()
        job_finish(job_id=job.pk, status=JobStatus.FAILED,
                   message=f"the worker ({job.worker}) stopped responding: no progress for {silent:.0f} s")
        reaped.append(job.pk)
        if job.attempt < settings.RAG_JOB_MAX_ATTEMPTS:
            root_reindex_request(root_id=job.root_id, force=True, trigger="retry", attempt=job.attempt + 1)
    return reaped
