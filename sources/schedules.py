"""Periodic jobs, kept in django-celery-beat's tables so admins can see and edit them."""

from sources.config import skill_reverify_minutes

REVERIFY_TASK_NAME = "Re-verify skills"
REAP_TASK_NAME = "Fail and retry stalled index jobs"


def schedules_ensure(**kwargs) -> None:
    """Create the fixed schedules on first migrate; never overwrite an admin's edits.

    Connected to post_migrate, so every deployment gets them after `migrate`: a signal receiver, an edge that
    builds its config.
    """
    minutes = skill_reverify_minutes()
    _ensure(
        REVERIFY_TASK_NAME,
        "sources.tasks.skills_reverify_task",
        max(minutes, 1),
        enabled=minutes > 0,
        description="Queues every skill and tool; unchanged ones are skipped by fingerprint, changed ones re-embedded.",
    )
    _ensure(
        REAP_TASK_NAME,
        "sources.tasks.jobs_reap_task",
        1,
        enabled=True,
        description="Hands index jobs whose worker died to another worker, and sends again what could not be "
        "queued while the broker was down.",
    )


def _ensure(name: str, task: str, minutes: int, *, enabled: bool, description: str) -> None:
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    if PeriodicTask.objects.filter(name=name).exists():
        return
    interval, _ = IntervalSchedule.objects.get_or_create(every=minutes, period=IntervalSchedule.MINUTES)
    PeriodicTask.objects.create(name=name, task=task, interval=interval, enabled=enabled, description=description)


_ROOT_TASK = "sources.tasks.root_reverify_task"


def _root_schedules(root_id: int):
    from django_celery_beat.models import PeriodicTask

    # Found by task and argument, not by name: the name follows the root's, which can change.
    return PeriodicTask.objects.filter(task=_ROOT_TASK, args=f"[{root_id}]")


def root_schedule_sync(*, root) -> None:
    """One editable periodic task per root, named after it, following its re-verify interval."""
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    schedules = _root_schedules(root.pk)
    if root.reverify_minutes == 0 or not root.enabled:
        schedules.update(enabled=False)
        return
    interval, _ = IntervalSchedule.objects.get_or_create(every=root.reverify_minutes, period=IntervalSchedule.MINUTES)
    fields = {
        "name": f"Re-verify root {root.name}"[:200],
        "interval": interval,
        "enabled": True,
        "description": f"Re-verifies workspace root {root.name!r}: only changed files are embedded.",
    }
    if not schedules.update(**fields):
        PeriodicTask.objects.create(task=_ROOT_TASK, args=f"[{root.pk}]", **fields)


def root_schedule_delete(*, root_id: int) -> None:
    _root_schedules(root_id).delete()
