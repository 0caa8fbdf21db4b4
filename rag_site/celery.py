"""The Celery application: configuration comes from Django settings (CELERY_*)."""

import os

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger

from kernel.logs import handlers_format
from sources.celery_hooks import hooks_install

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rag_site.settings")

app = Celery("rag_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Worker heartbeats, beat's heartbeat, and the recovery sweep whenever a worker connects to the broker.
hooks_install(app)


def _logs_format(logger=None, **_) -> None:
    """Celery's own log handlers (worker, beat) print RAG_LOG_FORMAT too, with the request id of the task's request."""
    from django.conf import settings

    if logger is not None:
        handlers_format(logger, log_format=settings.RAG_LOG_FORMAT)


after_setup_logger.connect(_logs_format, weak=False, dispatch_uid="rag_logs_format")
after_setup_task_logger.connect(_logs_format, weak=False, dispatch_uid="rag_task_logs_format")
