"""The Celery application: configuration comes from Django settings (CELERY_*)."""

import os

from celery import Celery

from sources.celery_hooks import hooks_install

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rag_site.settings")

app = Celery("rag_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Worker heartbeats, beat's heartbeat, and the recovery sweep whenever a worker connects to the broker.
hooks_install(app)
