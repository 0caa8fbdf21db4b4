"""Celery beat's scheduler: django-celery-beat's, plus a heartbeat file.

The file's age tells the health check (rag_site/healthcheck.py) that beat is
still ticking; a process that is alive but stuck would otherwise look healthy.
"""

from django.conf import settings
from django_celery_beat.schedulers import DatabaseScheduler

from rag_site.healthcheck import beat_heartbeat_path


class HeartbeatScheduler(DatabaseScheduler):
    def tick(self, *args, **kwargs):
        # After the tick, so a tick that raises leaves the file to age.
        interval = super().tick(*args, **kwargs)
        path = beat_heartbeat_path(settings.VAR_DIR)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        return interval
