"""Sending index tasks to the broker, and what happens while it cannot be reached.

A skill, tool or job that could not be queued is not failed: it stays
queued, and its ``last_error`` (skills, tools) or ``message`` (jobs) starts
with ``BROKER_WAIT``. The recovery sweep (sources/recovery.py: every minute
from beat, and whenever a worker connects to the broker) sends it again.
"""

import logging

from django.db import transaction
from django.db.models import Case, F, TextField, Value, When

from sources.models import IndexJob, IndexStatus, JobStatus, Skill, Tool

log = logging.getLogger(__name__)

BROKER_WAIT = "waiting for the broker"

# What the sweep sends again: (model, task, the field holding the note, what "queued" is).
_RESENDABLE = (
    (Skill, "skill_index_task", "last_error", {"index_status": IndexStatus.QUEUED}),
    (Tool, "tool_index_task", "last_error", {"index_status": IndexStatus.QUEUED}),
    (IndexJob, "root_index_task", "message", {"status": JobStatus.QUEUED}),
)


def task_send(task_name: str, object_id: int, **options: object) -> str:
    """Send the task now; "" when sent, else the reason to record (it starts with BROKER_WAIT)."""
    from sources import tasks

    try:
        getattr(tasks, task_name).delay(object_id, **options)
    except Exception as exc:  # noqa: BLE001 - whatever the broker client raises, the outcome is the same
        log.warning("could not queue %s(%s), the broker is unreachable; it is sent again when it is back: %s",
                    task_name, object_id, exc)
        return f"{BROKER_WAIT}: could not queue it ({exc}); it is sent again when the broker is back"
    return ""


def indexed_enqueue(model: type, object_id: int, task_name: str, **options: object) -> None:
    """Mark a skill or tool queued and send its task (with ``options``) once the transaction commits."""
    # A note that it waited for the broker goes; a real indexing error stays until the next success.
    model.objects.filter(pk=object_id).update(
        index_status=IndexStatus.QUEUED,
        last_error=Case(When(last_error__startswith=BROKER_WAIT, then=Value("")), default=F("last_error"),
                        output_field=TextField()),
    )

    def send() -> None:
        if reason := task_send(task_name, object_id, **options):
            model.objects.filter(pk=object_id).update(index_status=IndexStatus.QUEUED, last_error=reason)

    transaction.on_commit(send)


def job_enqueue(job_id: int) -> None:
    """Send a queued job's task once the transaction commits."""

    def send() -> None:
        if reason := task_send("root_index_task", job_id):
            IndexJob.objects.filter(pk=job_id, status=JobStatus.QUEUED).update(message=reason)

    transaction.on_commit(send)


def waiting_resend() -> dict[str, list[int]]:
    """Send again what could not be queued; stops at the first failure (the broker is still down).

    Each row is claimed by clearing its note in one UPDATE, so two sweeps
    never both send it; a send that fails puts the note back.
    """
    sent: dict[str, list[int]] = {}
    for model, task_name, field, queued in _RESENDABLE:
        waiting = model.objects.filter(**queued, **{f"{field}__startswith": BROKER_WAIT}).order_by("pk")
        for pk, note in waiting.values_list("pk", field):
            if not model.objects.filter(pk=pk, **{field: note}).update(**{field: ""}):
                continue  # another sweep, or a new save, took it
            if reason := task_send(task_name, pk):
                model.objects.filter(pk=pk, **{field: ""}).update(**{field: reason})
                return sent
            sent.setdefault(model._meta.model_name, []).append(pk)
    return sent
