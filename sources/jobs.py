"""Index jobs: requested once per root at a time, visible while they run,
taken over by another worker when theirs dies.

Who runs a job is proved by the root's advisory lock (sources/locks.py), held
by the running session: PostgreSQL drops it the moment that session ends. A
job "running" while nobody holds its lock has lost its worker; the next task
that arrives for it, or the recovery sweep, hands it on (attempt + 1), and
the new run resumes where the old one stopped (content hashes decide).
"""

import logging
import os
import posixpath
import socket
import time
from collections.abc import Iterable, Sequence
from datetime import timedelta

from django.db import DatabaseError, IntegrityError, transaction
from django.utils import timezone

from kernel.errors import ApplicationError, Conflict, Cooldown, NotFound
from sources import locks
from sources.config import JobsConfig, jobs_config
from sources.models import ACTIVE_JOB_STATUSES, IndexJob, JobStatus, WorkspaceRoot
from sources.progress import Counters, progress_advance
from sources.queues import job_queue

log = logging.getLogger(__name__)

MAX_ERRORS_KEPT = 100


class HandOff(Exception):
    """What a job found first is work for the bulk queue (a rebuild, a big diff): the job is queued there
    instead, as a full job with ``trigger`` (sources/pipeline/run.py)."""

    def __init__(self, reason: str, *, trigger: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.trigger = trigger


# A targeted job about more paths than this reads the root in full instead: walking is then the cheaper way.
MAX_TARGETED_PATHS = 1000


def root_job_request(
    *,
    root_id: int,
    force: bool = False,
    trigger: str = "admin",
    ignore_cooldown: bool = False,
    paths: Sequence[str] | None = None,
) -> tuple[IndexJob, bool]:
    """Create a queued job for the root, or return the one already queued or running.

    Returns ``(job, created)``; ``tasks.root_reindex_request`` sends a new
    job to a worker. A ``force`` job re-chunks and re-embeds
    every file, unchanged or not. Without ``force`` or ``ignore_cooldown``
    a root verified less than its cooldown ago is refused with the time left.

    ``paths`` (root-relative) asks for a targeted job that reads only those
    files (a directory: the files below it) and knows no cooldown. It joins a
    queued targeted job (their paths merge) and is absorbed by a queued full
    one; a full request widens a queued targeted job to the whole root. A
    running job is returned as is: the caller asks again once it has ended
    (``job.status`` says which happened).
    """
    wanted = paths_clean(paths) if paths is not None else None
    root = WorkspaceRoot.objects.filter(pk=root_id).first()
    if root is None:
        raise NotFound(f"workspace root {root_id} does not exist")
    if not root.enabled:
        raise Conflict(f"workspace root {root.name!r} is disabled; enable it first")
    with transaction.atomic():
        # Locked: the worker's claim locks the job too, so paths merged here are the paths it reads.
        active = IndexJob.objects.select_for_update().filter(root=root, status__in=ACTIVE_JOB_STATUSES).first()
        if active is not None:
            if active.status == JobStatus.QUEUED and active.paths:
                merged = sorted({*active.paths, *wanted}) if wanted else []
                active.paths = merged if len(merged) <= MAX_TARGETED_PATHS else []
                active.save(update_fields=["paths"])
            return active, False
    if wanted is None and not (force or ignore_cooldown) and root.last_verified_at is not None:
        elapsed = (timezone.now() - root.last_verified_at).total_seconds()
        if elapsed < root.cooldown_seconds:
            raise Cooldown(
                f"root {root.name!r} was verified {elapsed:.0f} s ago; its cooldown is {root.cooldown_seconds} s "
                "(use force to re-index now)",
                details={"retry_after_seconds": round(root.cooldown_seconds - elapsed)},
            )
    try:
        with transaction.atomic():
            job = IndexJob.objects.create(
                root=root,
                force=force,
                trigger=trigger,
                paths=wanted if wanted and len(wanted) <= MAX_TARGETED_PATHS else [],
            )
    except IntegrityError:
        # Another request won the race; the partial unique index says so.
        return IndexJob.objects.get(root=root, status__in=ACTIVE_JOB_STATUSES), False
    return job, True


def paths_clean(paths: Sequence[str]) -> list[str]:
    """The root-relative paths of a targeted job, sorted and unique, or a clear error naming the first bad one.

    Lexical only: whether a path leads through a symlink is decided when the
    job reads it (sources/walk.py never follows one).
    """
    clean = set()
    for path in paths:
        if (
            not isinstance(path, str)
            or path in ("", ".")
            or len(path) > 1024
            or "\x00" in path
            or posixpath.isabs(path)
            or posixpath.normpath(path) != path
            or path.split("/")[0] == ".."
        ):
            raise ApplicationError(
                f"{path!r} is not a root-relative path (like src/app.py: no leading /, no .., no empty parts)",
                details={"path": str(path)},
            )
        clean.add(path)
    return sorted(clean)


def jobs_ahead(jobs: Iterable[IndexJob]) -> dict[int, int]:
    """For each queued job of ``jobs``, how many jobs are ahead of it on its own queue (sources/queues.py).

    Ahead: those running on that queue, and those queued on it before it. Read
    from the database, not from the broker: the rows say what waits, whatever
    Redis holds. One query for any number of jobs (active jobs are at most one
    per root). Jobs not queued get no entry.
    """
    queued = [job for job in jobs if job.status == JobStatus.QUEUED]
    if not queued:
        return {}
    active = list(IndexJob.objects.filter(status__in=ACTIVE_JOB_STATUSES))
    return {
        job.pk: sum(
            1
            for other in active
            if other.pk != job.pk
            and job_queue(other) == job_queue(job)
            and (other.status == JobStatus.RUNNING or (other.created_at, other.pk) < (job.created_at, job.pk))
        )
        for job in queued
    }


def job_state(job: IndexJob, ahead: int | None) -> str:
    """What a person is told about a job's place: "queued behind 2 jobs on the bulk queue", "started", ...

    ``ahead``: the job's entry of ``jobs_ahead`` (None when it is not queued).
    A queued job is never said to have started: it may wait minutes behind a big one.
    """
    if job.status == JobStatus.QUEUED:
        queue = job_queue(job)
        if not ahead:
            return f"queued, next on the {queue} queue"
        return f"queued behind {ahead} job{'s' if ahead != 1 else ''} on the {queue} queue"
    if job.status == JobStatus.RUNNING:
        return "started"
    return job.get_status_display().lower()


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def job_start(*, job_id: int, config: JobsConfig | None = None) -> IndexJob | None:
    """Claim the job for this process, holding its root's lock; None when there is nothing to run.

    ``pipeline.root_index`` runs the claimed job and releases the lock. None
    for a finished job, for one a live session runs (a duplicate delivery),
    and for a root this session is already indexing. A running job whose
    lock nobody holds has lost its worker: this process takes it over.
    ``config``: built by the caller (the task), else from the settings now.
    """
    row = IndexJob.objects.filter(pk=job_id, status__in=ACTIVE_JOB_STATUSES).values_list("root_id", "worker").first()
    if row is None:
        return None  # done, cancelled or deleted: a redelivered task has nothing to do
    root_id, owner = row
    holder = locks.root_lock_holder(root_id)
    if holder is not None and _died_on_this_host(owner):
        # A pool child killed a moment ago: its message came back before PostgreSQL saw its session end.
        holder = _lock_free_soon(root_id)
    if holder is not None and holder == locks.backend_pid():
        return None  # this session runs it already
    if holder is not None or not locks.root_lock_try(root_id):
        # Another live session indexes the root. Its own job goes on; a second job would only wait for it.
        job_finish(
            job_id=job_id,
            status=JobStatus.CANCELLED,
            message="another worker is indexing this root right now",
            only_queued=True,
        )
        return None
    try:
        job = _claim(job_id, config or jobs_config())
    except BaseException:
        locks.root_lock_release(root_id)
        raise
    if job is None:
        locks.root_lock_release(root_id)
    return job


def _died_on_this_host(owner: str) -> bool:
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # alive, someone else's
    return False


def _lock_free_soon(root_id: int, *, within: float = 5.0) -> int | None:
    """The lock's holder after waiting up to ``within`` seconds for it to let go."""
    deadline = time.monotonic() + within
    while (holder := locks.root_lock_holder(root_id)) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    return holder


def _next_attempt(job: IndexJob, reason: str, action: str, *, max_attempts: int) -> tuple[int, str] | None:
    """The next attempt's number and message, or None once the job has used them all (it is then failed)."""
    if job.attempt >= max_attempts:
        _give_up(job, reason)
        return None
    attempt = job.attempt + 1
    return attempt, f"{reason}; {action} (attempt {attempt} of {max_attempts})"


def _claim(job_id: int, config: JobsConfig) -> IndexJob | None:
    now = timezone.now()
    with transaction.atomic():
        job = IndexJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None or job.status not in ACTIVE_JOB_STATUSES:
            return None
        if job.status == JobStatus.RUNNING:
            # We hold the root's lock, so the session that ran this job has ended.
            next_attempt = _next_attempt(
                job, f"its worker ({job.worker}) is gone", "taken over", max_attempts=config.max_attempts
            )
            if next_attempt is None:
                return None
            job.attempt, job.message = next_attempt
            log.warning("index job %s: %s", job.pk, job.message)
        # Each attempt counts from zero: what a dead run had done shows up again as "unchanged". The progress mark
        # stays: the bar holds where it was until the new attempt passes it, rather than going back.
        for name in _COUNTERS:
            setattr(job, name, 0)
        job.errors, job.left_out, job.skipped_by_reason, job.failed_by_reason = [], {}, {}, {}
        job.phase, job.progress_samples = "", []
        job.status = JobStatus.RUNNING
        job.started_at = job.started_at or now
        job.heartbeat_at = now
        job.worker = worker_name()
        job.save(
            update_fields=[
                "status",
                "started_at",
                "heartbeat_at",
                "worker",
                "attempt",
                "message",
                "errors",
                *_COUNTERS,
                *_TALLIES,
            ]
        )
    return job


def job_progress(job: IndexJob, **counters: int) -> None:
    """Save counters, the progress model and the heartbeat (one UPDATE); raises if the job was handed to another
    worker."""
    for name, value in counters.items():
        setattr(job, name, value)
    job.heartbeat_at = timezone.now()
    job.errors = job.errors[:MAX_ERRORS_KEPT]
    job.progress_mark, job.progress_samples = progress_advance(
        mark=job.progress_mark,
        samples=job.progress_samples,
        counters=Counters(job.files_total, job.files_seen, job.chunks_queued, job.chunks_embedded),
        phase=job.phase,
        now=job.heartbeat_at.timestamp(),
    )
    mine = IndexJob.objects.filter(pk=job.pk, status=JobStatus.RUNNING, worker=job.worker)
    if not mine.update(heartbeat_at=job.heartbeat_at, errors=job.errors, **_counters(job)):
        raise ApplicationError(
            f"index job {job.pk} is no longer this worker's ({job.worker}): it was cancelled, handed on or finished"
        )


def job_cancel(*, job_id: int, by: str) -> bool:
    """Cancel a queued or running job; False when it had already ended.

    A running job stops at its next heartbeat (after the current embedding
    batch): its worker finds the job no longer its own. What it stored so far
    stays, and the next job continues from there (fingerprints decide).
    """
    return bool(
        IndexJob.objects.filter(pk=job_id, status__in=ACTIVE_JOB_STATUSES).update(
            status=JobStatus.CANCELLED,
            message=f"cancelled by {by}",
            finished_at=timezone.now(),
        )
    )


def job_finish(
    *, job_id: int, status: str, message: str = "", job: IndexJob | None = None, only_queued: bool = False
) -> None:
    """Record the outcome, once: a finished job keeps its verdict.

    With ``job`` (the run's own copy) only that run's owner may finish it: a
    worker the job was taken from cannot overwrite its new owner's work.
    """
    fields = {
        "status": status,
        "message": message[:4000],
        "finished_at": timezone.now(),
        "heartbeat_at": timezone.now(),
    }
    rows = IndexJob.objects.filter(pk=job_id, status__in=[JobStatus.QUEUED] if only_queued else ACTIVE_JOB_STATUSES)
    if job is not None:
        fields.update(_counters(job), errors=job.errors[:MAX_ERRORS_KEPT])
        rows = rows.filter(worker=job.worker)
    rows.update(**fields)


# What a run tallies besides its counters, saved with them; the progress model's state too.
_TALLIES = ("left_out", "skipped_by_reason", "failed_by_reason", "phase", "progress_mark", "progress_samples")
_COUNTERS = (
    "files_total",
    "files_seen",
    "files_changed",
    "files_unchanged",
    "files_skipped",
    "files_failed",
    "files_deleted",
    "chunks_queued",
    "chunks_written",
    "chunks_embedded",
    "chunks_deleted",
    "chunks_undescribed",
)


def _counters(job: IndexJob) -> dict[str, object]:
    return {name: getattr(job, name) for name in (*_COUNTERS, *_TALLIES)}


def _give_up(job: IndexJob, reason: str) -> None:
    job_finish(
        job_id=job.pk,
        status=JobStatus.FAILED,
        message=f"{reason}; {job.attempt} attempt(s) failed the same way, giving up (RAG_JOB_MAX_ATTEMPTS)",
    )
    log.warning("index job %s failed for good: %s", job.pk, reason)


def jobs_reap(*, stale_after: int | None = None, config: JobsConfig | None = None) -> list[int]:
    """Hand running jobs whose worker is gone back to the queue; returns their ids (the caller sends them).

    No session holds the job's root lock: its worker died, the job goes back
    to the queue at once. The lock is held but the job made no progress for
    ``stale_after`` seconds (RAG_JOB_STALE_SECONDS): its worker hangs, or its
    host vanished and the connection lingers; that session is ended, which
    releases the lock, and the job goes back the same way. A live job beats
    after every embedding batch, so a slow one is never taken for a hung one.
    ``config``: built by the caller (the task), else from the settings now.
    """
    config = config or jobs_config()
    stale = stale_after if stale_after is not None else config.stale_seconds
    cutoff = timezone.now() - timedelta(seconds=stale)
    own = locks.backend_pid()
    handed = []
    for job in IndexJob.objects.filter(status=JobStatus.RUNNING):
        holder = locks.root_lock_holder(job.root_id)
        if holder is None:
            reason = f"its worker ({job.worker}) is gone"
        elif holder == own or job.heartbeat_at is None or job.heartbeat_at >= cutoff:
            continue  # alive (or this very session runs it)
        else:
            silent = (timezone.now() - job.heartbeat_at).total_seconds()
            reason = f"its worker ({job.worker}) made no progress for {silent:.0f} s"
            try:
                locks.backend_terminate(holder)
            except DatabaseError as exc:
                log.warning("index job %s: could not end the session of its hung worker: %s", job.pk, exc)
                continue
            reason += "; its database session was ended"
        if _hand_back(job, reason, max_attempts=config.max_attempts):
            handed.append(job.pk)
    return handed


def _hand_back(job: IndexJob, reason: str, *, max_attempts: int) -> bool:
    """Queue a running job again for another worker, unless it has used up its attempts."""
    next_attempt = _next_attempt(job, reason, "queued again", max_attempts=max_attempts)
    if next_attempt is None:
        return False
    attempt, message = next_attempt
    # Only if it is still the same run: a worker may have taken it over since it was read.
    if not IndexJob.objects.filter(pk=job.pk, status=JobStatus.RUNNING, worker=job.worker).update(
        status=JobStatus.QUEUED, attempt=attempt, worker="", message=message
    ):
        return False
    log.warning("index job %s: %s", job.pk, message)
    return True
