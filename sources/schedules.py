"""Periodic jobs, kept in django-celery-beat's tables so admins can see and edit them."""

from django.conf import settings

REVERIFY_TASK_NAME = "Re-verify skills"


def schedules_ensure(**kwargs) -> None:
    """Create the periodic re-verify on first migrate; never overwrite an admin's edits.

    Connected to post_migrate, so every deployment gets it after `migrate`.
    """
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    if PeriodicTask.objects.filter(name=REVERIFY_TASK_NAME).exists():
        return
    minutes = settings.RAG_SKILL_REVERIFY_MINUTES
    interval, _ = IntervalSchedule.objects.get_or_create(every=max(minutes, 1), period=IntervalSchedule.MINUTES)
    PeriodicTask.objects.create(
        name=REVERIFY_TASK_NAME,
        task="sources.tasks.skills_reverify_task",
        interval=interval,
        enabled=minutes > 0,
        description="Queues every skill; unchanged skills are skipped by content hash, changed ones re-embedded.",
    )
