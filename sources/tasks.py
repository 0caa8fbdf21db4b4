"""Celery tasks, and every way work is sent to them.

The edges (admin, signals, API, beat) queue work through ``item_enqueue``
(every item kind of sources/items.py) and ``root_reindex_request`` here; services and storage never
know about Celery. Tasks take an id and call one service; they are safe to
rerun (fingerprints decide what is embedded). Tasks are edges too: each
builds the config its service takes (sources/config.py) from the settings.
Which queue each send goes to is decided in sources/queues.py (interactive
or bulk: ``ITEM_QUEUES`` per item kind, ``job_queue`` per job); only a
re-verify of everything asks for bulk by name.
"""

import logging

from celery import shared_task
from django.conf import settings
from django.db import DatabaseError, transaction

from kernel import heartbeats, metrics
from kernel.errors import ApplicationError
from sources import jobs, pipeline, queueing
from sources.config import indexing_config, jobs_config
from sources.items import ITEM_KINDS
from sources.models import IndexJob, JobStatus, WorkspaceRoot
from sources.queues import BULK, INTERACTIVE, job_queue

log = logging.getLogger(__name__)


# One retry policy for every item kind: a problem with the content or the
# model fails at once with its reason (retrying will not help); a database
# error is retried with a growing delay, then fails; anything else fails
# with its type and is raised (the worker logs it).
_ITEM_TASK = {"bind": True, "acks_late": True, "reject_on_worker_lost": True, "max_retries": 3}


def _item_run(task, kind: str, pk: int, index, failed) -> dict | None:
    try:
        outcome = index()
    except ApplicationError as exc:
        failed(pk, exc.message)
        log.warning("%s %s failed to index: %s", kind, pk, exc.message)
        return {"status": "failed", "reason": exc.message}
    except DatabaseError as exc:
        if task.request.retries >= task.max_retries:
            failed(pk, f"database error after {task.max_retries} retries: {exc}")
            raise
        raise task.retry(exc=exc, countdown=settings.RAG_INDEX_RETRY_DELAY * (task.request.retries + 1)) from exc
    except Exception as exc:
        failed(pk, f"unexpected error: {type(exc).__name__}: {exc}")
        raise
    if outcome is None:
        return None  # deleted after it was queued: nothing to do
    return {"status": "skipped" if outcome.skipped else "indexed", "chunks": outcome.chunks_embedded}


def _item_index(task, kind: str, pk: int, force: bool = False) -> dict | None:
    item = ITEM_KINDS[kind]
    return _item_run(task, kind, pk, lambda: item.index(pk, force, indexing_config()), item.failed)


@shared_task(**_ITEM_TASK)
def item_index_task(self, kind: str, pk: int, force: bool = False) -> dict | None:
    """Index one skill, tool, uploaded document or memory (``kind``: a key of sources.items.ITEM_KINDS)."""
    return _item_index(self, kind, pk, force)


# The per-kind tasks item_index_task replaced: messages a broker still held at the upgrade are run all the same.
@shared_task(**_ITEM_TASK)
def skill_index_task(self, skill_id: int, force: bool = False) -> dict | None:
    return _item_index(self, "skill", skill_id, force)


@shared_task(**_ITEM_TASK)
def tool_index_task(self, tool_id: int) -> dict | None:
    return _item_index(self, "tool", tool_id)


@shared_task(**_ITEM_TASK)
def document_index_task(self, document_id: int, force: bool = False) -> dict | None:
    return _item_index(self, "document", document_id, force)


@shared_task(**_ITEM_TASK)
def memory_index_task(self, memory_id: int) -> dict | None:
    return _item_index(self, "memory", memory_id)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True)
def root_index_task(self, job_id: int) -> str | None:
    """Run an index job; a message for a finished job, or one a live worker runs, does nothing."""
    arrived_on = (self.request.delivery_info or {}).get("routing_key")
    job = IndexJob.objects.filter(pk=job_id, status=JobStatus.QUEUED).first()
    if job is not None and arrived_on and arrived_on != job_queue(job):
        # Sent as a targeted job, then widened to the whole root (or given a document to extract) while it waited
        # (jobs.root_job_request): that belongs on the bulk worker, where it cannot hold up saves.
        if reason := _send("indexjob", job_id):
            queueing.queued_note(IndexJob, job_id, reason)
        return None
    job = jobs.job_start(job_id=job_id, config=jobs_config())
    if job is None:
        return None
    status = pipeline.root_index(job=job, config=indexing_config(), helpers=vectors_helpers_send)
    if status == JobStatus.QUEUED:
        # A git fetch found a rebuild or a big diff: the job goes on, from the bulk queue (its lock is free now).
        if reason := _send("indexjob", job_id):
            queueing.queued_note(IndexJob, job_id, reason)
    return status


# A job asks at most this many helpers at once: one message per bulk worker process that may be idle.
MAX_VECTOR_HELPERS = 64


def vectors_helpers_send(job_id: int, count: int) -> None:
    """Ask up to ``count`` bulk worker processes to embed the job's vector batches too (pipeline.root_index's
    ``helpers``). A helper that arrives when no batch is left does nothing; a broker that cannot be reached
    leaves the job's own process to embed them all."""
    for _ in range(min(count, MAX_VECTOR_HELPERS)):
        try:
            vectors_batch_task.apply_async((job_id,), queue=BULK)
        except Exception as exc:  # noqa: BLE001 - whatever the broker client raises, the job goes on alone
            log.warning(
                "could not ask for help with the vectors of job %s (the job embeds them alone): %s", job_id, exc
            )
            return


@shared_task
def vectors_batch_task(job_id: int) -> int:
    """Embed vector batches of a running job until none is left to claim (sources/pipeline/vectors.py); returns how
    many vectors this process stored. Not acks_late: a helper that dies loses its batch's lock with its session,
    and the job's own process or another helper claims it again."""
    try:
        return pipeline.vectors_fill(job_id, config=indexing_config())
    except ApplicationError as exc:
        # The job's own process meets the same batch and fails the job with the reason; a helper only says so.
        log.warning("vectors of job %s: a batch failed here: %s", job_id, exc.message)
        return 0


@shared_task(acks_late=True)
def root_reverify_task(root_id: int) -> int | None:
    """The periodic re-verify of one root (its schedule is editable in admin); a git root's is a fetch."""
    try:
        if WorkspaceRoot.objects.filter(pk=root_id).exclude(git_url="").exists():
            job, _ = root_reindex_request(root_id=root_id, trigger="fetch", ignore_cooldown=True)
        else:
            job, _ = root_reindex_request(root_id=root_id, trigger="schedule")
    except ApplicationError as exc:
        log.info("root %s not re-verified: %s", root_id, exc.message)  # cooldown, disabled or deleted
        return None
    return job.pk


@shared_task(acks_late=True)
def jobs_reap_task() -> dict[str, list[int]]:
    """The recovery sweep (its name predates it: existing schedules call it by this name)."""
    return recovery_sweep()


@shared_task(acks_late=True)
def skills_reverify_task() -> int:
    """Queue every skill, tool, uploaded document and memory (every item kind); unchanged ones are skipped by
    fingerprint without embedding. Returns how many.

    On the bulk queue: after a model swap every one of them is re-embedded, and
    a skill saved meanwhile must not wait behind them on the interactive queue.
    An upgraded extractor changes an uploaded document's fingerprint (checked
    without reading the file); a memory not embedded again after a model swap
    would be lost to recall.
    """
    count = 0
    for name, kind in ITEM_KINDS.items():
        for pk in list(kind.model.objects.values_list("pk", flat=True)):
            item_enqueue(kind=name, pk=pk, bulk=True)
            count += 1
    return count


def item_enqueue(*, kind: str, pk: int, force: bool = False, bulk: bool = False) -> None:
    """Queue an item's indexing after commit, on its kind's queue; ``force`` re-embeds it even if unchanged.

    ``bulk``: on the bulk queue (a re-verify of everything), not the one a save uses.
    """
    item = ITEM_KINDS[kind]
    if force and item.forget is not None:
        # A task re-sent after a broker outage goes without its options: with no
        # fingerprint stored, the plain task re-embeds the item too.
        item.forget(pk)
    queueing.queued_mark(item.model, pk)
    options = {"force": True} if force else {}
    _send_on_commit(kind, pk, queue=BULK if bulk else None, **options)


def root_reindex_request(**request) -> tuple[IndexJob, bool]:
    """``jobs.root_job_request`` (same arguments and errors), and the new job sent after commit."""
    job, created = jobs.root_job_request(**request)
    if created:
        _send_on_commit("indexjob", job.pk, queue=job_queue(job))
    return job, created


def root_push_request(*, root_id: int) -> IndexJob:
    """A push arrived (webhook): a fetch job on the interactive queue, or the job already queued or running.

    A job running now may have fetched before this push: a follow-up asks again once it has ended.
    """
    job, created = root_reindex_request(root_id=root_id, trigger="push", ignore_cooldown=True)
    if not created and job.status == JobStatus.RUNNING:
        transaction.on_commit(lambda: _push_follow_up(root_id))
    return job


def _push_follow_up(root_id: int) -> None:
    try:
        root_push_retry_task.apply_async((root_id,), countdown=1, queue=INTERACTIVE)
    except Exception as exc:  # noqa: BLE001 - the schedule's fetch catches the push later all the same
        log.warning("could not queue the follow-up fetch of root %s: %s", root_id, exc)


@shared_task(bind=True, max_retries=600)
def root_push_retry_task(self, root_id: int) -> int | None:
    """Ask for a fetch job again once the running one has ended (a push arrived while it ran)."""
    try:
        job, created = root_reindex_request(root_id=root_id, trigger="push", ignore_cooldown=True)
    except ApplicationError as exc:
        log.info("root %s: follow-up fetch not queued: %s", root_id, exc.message)
        return None
    if not created and job.status == JobStatus.RUNNING:
        raise self.retry(countdown=2)
    return job.pk


def recovery_sweep() -> dict[str, list[int]]:
    """Hand on jobs whose worker died; send again what waited for the broker. Returns the ids by kind.

    Runs every minute from beat (the "Fail and retry stalled index jobs"
    schedule) and whenever a worker connects to the broker (at start and
    after an outage), so an outage heals as soon as the broker is back.
    """
    handed = jobs.jobs_reap(config=jobs_config())
    for job_id in handed:
        _send_on_commit("indexjob", job_id)
    done = {"jobs_handed_on": handed, **queueing.waiting_resend(_send)}
    heartbeats.heartbeat_record(heartbeats.SWEEP)
    if any(done.values()):
        log.info("recovery sweep: %s", {kind: ids for kind, ids in done.items() if ids})
    return done


def _send(kind: str, object_id: int, *, queue: str | None = None, **options: object) -> str:
    """Send the task now; "" when sent, else the reason to record (it starts with BROKER_WAIT).

    ``queue``: None sends an item to its task's queue (CELERY_TASK_ROUTES, from sources/queues.py) and a job to
    the queue its row calls for (``queues.job_queue``).
    """
    args: tuple[object, ...]
    if kind == "indexjob":
        task, args = root_index_task, (object_id,)
        if queue is None:
            job = IndexJob.objects.filter(pk=object_id).first()
            queue = job_queue(job) if job is not None else BULK
    else:
        task, args = item_index_task, (kind, object_id)
        queue = queue or ITEM_KINDS[kind].queue
    try:
        task.apply_async(args, options, queue=queue)
    except Exception as exc:  # noqa: BLE001 - whatever the broker client raises, the outcome is the same
        log.warning(
            "could not queue %s(%s), the broker is unreachable; it is sent again when it is back: %s",
            task.name,
            object_id,
            exc,
        )
        metrics.BROKER_WAITS.labels(kind=kind).inc()
        return queueing.broker_wait_reason(exc)
    return ""


def _send_on_commit(kind: str, object_id: int, *, queue: str | None = None, **options: object) -> None:
    """Send once the transaction commits; a broker that cannot be reached leaves a note the sweep reads."""

    def send() -> None:
        if reason := _send(kind, object_id, queue=queue, **options):
            queueing.queued_note(IndexJob if kind == "indexjob" else ITEM_KINDS[kind].model, object_id, reason)

    transaction.on_commit(send)
