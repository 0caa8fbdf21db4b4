"""Celery tasks: take an id, call one service. Safe to rerun (hashes decide)."""

import logging

from celery import shared_task
from django.conf import settings
from django.db import DatabaseError

from sources import services

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


@shared_task(acks_late=True)
def skills_reverify_task() -> int:
    return services.skills_reverify()
