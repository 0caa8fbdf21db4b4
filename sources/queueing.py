"""What the database records about sending work to the broker; the sending itself is in tasks.py.

A skill, tool or job that could not be queued is not failed: it stays
queued, and its ``last_error`` (skills, tools) or ``message`` (jobs) starts
with ``BROKER_WAIT``. The recovery sweep (``tasks.recovery_sweep``: every
minute from beat, and whenever a worker connects to the broker) sends it again.
Nothing here imports Celery.
"""

from collections.abc import Callable, Mapping

from django.db.models import Case, F, TextField, Value, When

from sources.ingest import ItemModel
from sources.items import ITEM_KINDS
from sources.models import IndexJob, IndexStatus, JobStatus

BROKER_WAIT = "waiting for the broker"

# What the sweep sends again: (kind, model, the field holding the note, what "queued" is).
RESENDABLE: tuple[tuple[str, ItemModel | type[IndexJob], str, Mapping[str, object]], ...] = (
    *((name, kind.model, "last_error", {"index_status": IndexStatus.QUEUED}) for name, kind in ITEM_KINDS.items()),
    ("indexjob", IndexJob, "message", {"status": JobStatus.QUEUED}),
)


def broker_wait_reason(error: Exception) -> str:
    return f"{BROKER_WAIT}: could not queue it ({error}); it is sent again when the broker is back"


def queued_mark(model: ItemModel, object_id: int) -> None:
    """A skill or tool is queued; a note that it waited for the broker goes, a real indexing error stays until the next
    success."""
    model.objects.filter(pk=object_id).update(
        index_status=IndexStatus.QUEUED,
        last_error=Case(
            When(last_error__startswith=BROKER_WAIT, then=Value("")), default=F("last_error"), output_field=TextField()
        ),
    )


def queued_note(model: ItemModel | type[IndexJob], object_id: int, reason: str) -> None:
    """The skill or tool (``model``) or job (IndexJob) could not be sent: it stays queued with the reason."""
    if model is IndexJob:
        IndexJob.objects.filter(pk=object_id, status=JobStatus.QUEUED).update(message=reason)
    else:
        model.objects.filter(pk=object_id).update(  # type: ignore[misc]  # an item model (mypy cannot narrow it)
            index_status=IndexStatus.QUEUED, last_error=reason
        )


def waiting_resend(send: Callable[[str, int], str]) -> dict[str, list[int]]:
    """Send again what could not be queued, with ``send(kind, id)`` ("" when sent, else the reason).

    Stops at the first failure (the broker is still down). Each row is
    claimed by clearing its note in one UPDATE, so two sweeps never both
    send it; a send that fails puts the note back.
    """
    sent: dict[str, list[int]] = {}
    for kind, model, field, queued in RESENDABLE:
        waiting = model.objects.filter(**queued, **{f"{field}__startswith": BROKER_WAIT}).order_by("pk")
        for pk, note in waiting.values_list("pk", field):
            if not model.objects.filter(pk=pk, **{field: note}).update(**{field: ""}):
                continue  # another sweep, or a new save, took it
            if reason := send(kind, pk):
                model.objects.filter(pk=pk, **{field: ""}).update(**{field: reason})
                return sent
            sent.setdefault(kind, []).append(pk)
    return sent
