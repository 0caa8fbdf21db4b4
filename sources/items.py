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
from typing import Any

from sources import ingest, memories, services, tools, uploads
from sources.config import IndexingConfig
from sources.ingest import IndexOutcome, ItemModel
from sources.models import Memory, Skill, Source, Tool, UploadedDocument
from sources.queues import ITEM_QUEUES

# (pk, force, config) -> what indexing did; None when the row was deleted after it was queued.
Index = Callable[[int, bool, IndexingConfig], IndexOutcome | None]


@dataclass(frozen=True, slots=True)
class ItemKind:
    name: str
    model: ItemModel
    index: Index
    # As a row is saved (its scope and enabled flag apply to search at once) and before it is deleted; the one pair
    # of signal receivers (sources/signals.py) calls them for every kind. Each looks its service up when called.
    source_sync: Callable[[Any], object]
    deleting: Callable[[Any], object]
    # Before a forced send: what makes even a task re-sent without its options (after a broker outage) re-embed.
    forget: Callable[[int], None] | None = None
    # Whether a save with these ``update_fields`` (None: a whole save) may have changed what is indexed.
    reindexes: Callable[[frozenset[str] | None], bool] = lambda update_fields: True

    @property
    def queue(self) -> str:
        return ITEM_QUEUES[self.name]

    def failed(self, pk: int, reason: str) -> None:
        """The item keeps its previous chunks; the reason shows in the admin and the API."""
        ingest.item_failed(self.model, pk, reason)


def _document_deleting(document: UploadedDocument) -> None:
    uploads.document_delete_source(document_id=document.pk)
    uploads.document_delete_file(document)


ITEM_KINDS: dict[str, ItemKind] = {
    kind.name: kind
    for kind in (
        ItemKind(
            "skill",
            Skill,
            lambda pk, force, config: services.skill_index(skill_id=pk, force=force, config=config),
            source_sync=lambda skill: services.skill_source_sync(skill),
            deleting=lambda skill: services.skill_delete_source(skill_id=skill.pk),
            forget=lambda pk: services.skill_fingerprint_forget(skill_id=pk),
        ),
        ItemKind(
            "tool",
            Tool,
            lambda pk, force, config: tools.tool_index(tool_id=pk, config=config),
            source_sync=lambda tool: tools.tool_source_sync(tool),
            deleting=lambda tool: Source.objects.filter(tool__pk=tool.pk).delete(),
        ),
        ItemKind(
            "document",
            UploadedDocument,
            lambda pk, force, config: uploads.document_index(document_id=pk, force=force, config=config),
            source_sync=lambda document: uploads.document_source_sync(document),
            deleting=_document_deleting,
        ),
        ItemKind(
            "memory",
            Memory,
            lambda pk, force, config: memories.memory_index(memory_id=pk, config=config),
            # Scope, approval, supersession and expiry apply at once; only a new text is embedded again.
            source_sync=lambda memory: memories.memory_source_sync(memory),
            deleting=lambda memory: memories.memory_delete_source(memory_id=memory.pk),
            reindexes=lambda update_fields: update_fields is None or "text" in update_fields,
        ),
    )
}
ITEM_KINDS_BY_MODEL: dict[type, ItemKind] = {kind.model: kind for kind in ITEM_KINDS.values()}
