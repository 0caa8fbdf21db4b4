"""Celery tasks: take an id, call one service. Safe to rerun (hashes decide)."""

import logging

from celery import shared_task
from django.conf import settings
from django.db import DatabaseError

from rag_site.errors import ApplicationError
from sources import jobs, recovery, roots, services, tools

log = logging.getLogger(__name__)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=3)
def skill_index_task(self, skill_id: int, force: bool = False) -> dict | None:
    try:
        outcome = services.skill_index(skill_id=skill_id, force=force)
    except services.IndexingError as exc:
        # A problem with the content or the model: retrying will not help.
        services.skill_index_failed(skill_id=skill_id, reason=exc.message)
        log.warning("skill %s failed to index: %s", skill_id, exc.message)
        return {"status": "failed", "reason": exc.message}
    except DatabaseError as exc:
        if self.request.retries >= self.max_retries:
            services.skill_index_failed(skill_id=skill_id, reason=f"database error after {self.max_retries} retries: {exc}")
            raise
        raise self.retry(exc=exc, countdown=settings.RAG_INDEX_RETRY_DELAY * (self.request.retries + 1))
    except Exception as exc:
        services.skill_index_failed(skill_id=skill_id, reason=f"unexpected error: {type(exc).__name__}: {exc}")
        raise
    if outcome is None:
        return None  # deleted after it was queued: nothing to do
    return {"status": "skipped" if outcome.skipped else "indexed", "chunks": outcome.chunks_embedded}


@shared_task(acks_late=True, reject_on_worker_lost=True)
def tool_index_task(tool_id: int) -> str | None:
    try:
        changed = tools.tool_index(tool_id=tool_id)
    except ApplicationError as exc:
        tools.tool_index_failed(tool_id=tool_id, reason=exc.message)
        return "failed"
    except Exception as exc:
        tools.tool_index_failed(tool_id=tool_id, reason=f"unexpected error: {type(exc).__name__}: {exc}")
        raise
    return None if changed is None else ("indexed" if changed else "skipped")


@shared_task(acks_late=True, reject_on_worker_lost=True)
def root_index_task(job_id: int) -> str | None:
    """Run an index job; a message for a finished job, or one a live worker runs, does nothing."""
    job = jobs.job_start(job_id=job_id)
    if job is None:
        return None
    return roots.root_index(job=job)


@shared_task(acks_late=True)
def root_reverify_task(root_id: int) -> int | None:
    """The periodic re-verify of one root (its schedule is editable in admin)."""
    try:
        job, _ = jobs.root_reindex_request(root_id=root_id, trigger="schedule")
    except ApplicationError as exc:
        log.info("root %s not re-verified: %s", root_id, exc.message)  # cooldown, disabled or deleted
        return None
    return job.pk


@shared_task(acks_late=True)
def jobs_reap_task() -> dict[str, list[int]]:
    """The recovery sweep (its name predates it: existing schedules call it by this name)."""
    return recovery.recovery_sweep()


@shared_task(acks_late=True)
def skills_reverify_task() -> int:
    return services.skills_reverify()
