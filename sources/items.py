"""The item kinds: sources indexed one row at a time, each with its own status (skills, tools, uploads, memories).

One registry, so one task (``tasks.item_index_task``), one enqueue
(``tasks.item_enqueue``), the recovery sweep and the re-verify of everything
serve every kind. A new kind is its service (``<kind>_index``) and one entry
here; its queue is in the one table, ``sources.queues.ITEM_QUEUES``.
Roots (folders, git remotes, websites) are not items: they run as index jobs
through the connector pipeline (sources/pipeline.py).
"""

from collections.abc import Callable
from dataclasses import dataclass

from sources import ingest, memories, services, tools, uploads
from sources.config import IndexingConfig
from sources.ingest import IndexOutcome, ItemModel
from sources.models import Memory, Skill, Tool, UploadedDocument
from sources.queues import ITEM_QUEUES

# (pk, force, config) -> what indexing did; None when the row was deleted after it was queued.
Index = Callable[[int, bool, IndexingConfig], IndexOutcome | None]


@dataclass(frozen=True, slots=True)
class ItemKind:
    name: str
    model: ItemModel
    index: Index
    # Before a forced send: what makes even a task re-sent without its options (after a broker outage) re-embed.
    forget: Callable[[int], None] | None = None

    @property
    def queue(self) -> str:
        return ITEM_QUEUES[self.name]

    def failed(self, pk: int, reason: str) -> None:
        """The item keeps its previous chunks; the reason shows in the admin and the API."""
        ingest.item_failed(self.model, pk, reason)


ITEM_KINDS: dict[str, ItemKind] = {
    kind.name: kind
    for kind in (
        ItemKind(
            "skill",
            Skill,
            lambda pk, force, config: services.skill_index(skill_id=pk, force=force, config=config),
            forget=lambda pk: services.skill_fingerprint_forget(skill_id=pk),
        ),
        ItemKind("tool", Tool, lambda pk, force, config: tools.tool_index(tool_id=pk, config=config)),
        ItemKind(
            "document",
            UploadedDocument,
            lambda pk, force, config: uploads.document_index(document_id=pk, force=force, config=config),
        ),
        ItemKind("memory", Memory, lambda pk, force, config: memories.memory_index(memory_id=pk, config=config)),
    )
}
