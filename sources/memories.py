"""Memories: write, supersede, change, approve and index the short facts bots keep for later conversations.

Who may write which memory is access's rule (access/memories.py); the edges
check it and pass the scope in. Writes here are atomic, and every save of a
memory reaches ``memory_source_sync`` (the post_save receiver), so whether a
memory is served (approved, not superseded) and until when (its expiry)
apply to search at once. Its text is indexed as one chunk on the interactive
queue, like a saved skill.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from kernel.errors import Conflict, InvalidInput, NotFound
from kernel.text import control_characters_message
from sources import ingest
from sources.config import IndexingConfig, indexing_config
from sources.ingest import IndexOutcome
from sources.models import Memory, Source, source_key

# A memory is one fact, not a document (upload those): 2,000 characters is a long paragraph, and about what the
# default embedding model reads of one text (256 word pieces); the rest would be indexed lexically only.
MEMORY_MAX_CHARS = 2000


@dataclass(frozen=True, slots=True)
class MemoryScope:
    """Who will see a memory: its Source's bot, client and channels (access.memories decides what a caller may set)."""

    bot_id: str = ""
    client_id: str = ""
    channels: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Provenance:
    """Who wrote a memory, and in what conversation or run."""

    author: str
    api_key_id: int | None = None
    conversation_id: str = ""
    citation: str = ""


def memory_text_clean(text: str) -> str:
    """The text as stored (trimmed, \\n line endings), or InvalidInput saying what is wrong with it."""
    clean = text.replace("\r\n", "\n").replace("\r", "\n").strip()
    if not clean:
        raise InvalidInput("text: a memory needs some text", details={"field": "text"})
    if len(clean) > MEMORY_MAX_CHARS:
        raise InvalidInput(
            f"text: {len(clean):,} characters; a memory holds at most {MEMORY_MAX_CHARS:,} (upload longer texts as "
            "documents)",
            details={"field": "text"},
        )
    if problem := control_characters_message(clean, "text"):
        raise InvalidInput(problem, details={"field": "text"})
    return clean


def _expiry_checked(expires_at: datetime | None) -> datetime | None:
    if expires_at is None:
        return None
    if timezone.is_naive(expires_at):
        raise InvalidInput("expires_at: give a time zone (2026-12-01T09:00:00Z)", details={"field": "expires_at"})
    if expires_at <= timezone.now():
        raise InvalidInput(
            "expires_at: already past; a memory must expire in the future", details={"field": "expires_at"}
        )
    return expires_at


@transaction.atomic
def memory_write(
    *,
    text: str,
    scope: MemoryScope,
    provenance: Provenance,
    expires_at: datetime | None = None,
    supersedes: Memory | None = None,
    approved: bool = True,
) -> Memory:
    """A new memory; ``supersedes``: the one it replaces, kept and marked superseded (when, by which) in the same
    transaction. ``approved`` False holds it unserved until ``memory_approve``."""
    clean = memory_text_clean(text)
    expiry = _expiry_checked(expires_at)
    old = None
    if supersedes is not None:
        # Locked: two writers superseding the same memory would both succeed and leave two current versions.
        old = Memory.objects.select_for_update().filter(pk=supersedes.pk).first()
        if old is None:
            raise NotFound(f"memory {supersedes.pk} does not exist")
        if old.superseded_at is not None:
            raise _already_superseded(old)
    now = timezone.now()
    memory = Memory.objects.create(
        text=clean,
        bot_id=scope.bot_id,
        client_id=scope.client_id,
        channels=" ".join(scope.channels),
        author=provenance.author[:200],
        api_key_id=provenance.api_key_id,
        conversation_id=provenance.conversation_id,
        citation=provenance.citation,
        expires_at=expiry,
        approved_at=now if approved else None,
        supersedes=old,
    )
    if old is not None:
        old.superseded_at = now
        old.save(update_fields=["superseded_at", "updated_at"])  # post_save: its source stops being served
    return memory


def _already_superseded(old: Memory, *, verb: str = "supersede") -> Conflict:
    """The refusal to supersede (or change) a memory that has been superseded: it names the current version, the
    end of the chain (A superseded by B, B by C: C), which the caller should ``verb`` instead."""
    newer = Memory.objects.filter(supersedes=old).only("pk", "superseded_at").first()
    current, seen = newer, {old.pk}
    while current is not None and current.superseded_at is not None and current.pk not in seen:
        seen.add(current.pk)
        current = Memory.objects.filter(supersedes=current).only("pk", "superseded_at").first()
    if current is None or current.superseded_at is not None:
        # The chain ends in a forgotten (deleted) version: nothing current to name.
        return Conflict(
            f"memory {old.pk} is already superseded, and its later versions were forgotten",
            details={"superseded_by": newer.pk if newer else None, "current": None},
        )
    return Conflict(
        f"memory {old.pk} is already superseded; the current version is memory {current.pk}: {verb} that one",
        details={"superseded_by": newer.pk if newer else None, "current": current.pk},
    )


@transaction.atomic
def memory_change(
    memory: Memory,
    *,
    provenance: Provenance,
    text: str | None = None,
    expires_at: datetime | None = None,
    expires_at_given: bool = False,
    citation: str | None = None,
    conversation_id: str | None = None,
    approved: bool = True,
) -> Memory:
    """Change a memory: a new text makes a new version that supersedes it (the other changes go with it, the
    scope stays); without one, its expiry, citation and conversation change in place. Returns the current version."""
    if memory.superseded_at is not None:
        raise _already_superseded(memory, verb="change")
    expiry = expires_at if expires_at_given else memory.expires_at
    if text is not None and memory_text_clean(text) != memory.text:
        return memory_write(
            text=text,
            scope=MemoryScope(memory.bot_id, memory.client_id, tuple(memory.channels.split())),
            provenance=Provenance(
                author=provenance.author,
                api_key_id=provenance.api_key_id,
                conversation_id=memory.conversation_id if conversation_id is None else conversation_id,
                citation=memory.citation if citation is None else citation,
            ),
            expires_at=expiry if expiry is None or expiry > timezone.now() else None,
            supersedes=memory,
            approved=approved,
        )
    fields = ["updated_at"]
    if expires_at_given:
        memory.expires_at = _expiry_checked(expires_at)
        fields.append("expires_at")
    if citation is not None:
        memory.citation, fields = citation, [*fields, "citation"]
    if conversation_id is not None:
        memory.conversation_id, fields = conversation_id, [*fields, "conversation_id"]
    memory.save(update_fields=fields)
    return memory


def memory_approve(*, memory_ids: list[int], user=None) -> int:
    """Serve the memories awaiting approval among ``memory_ids``; how many were approved."""
    approved = 0
    for memory in Memory.objects.filter(pk__in=memory_ids, approved_at__isnull=True):
        memory.approved_at, memory.approved_by = timezone.now(), user
        memory.save(update_fields=["approved_at", "approved_by", "updated_at"])  # post_save: served at once
        approved += 1
    return approved


def memory_source_sync(memory: Memory) -> Source:
    """The memory's Source row, created when it is saved: scope, whether it is served and its expiry apply at once."""
    source = memory.source
    if source is None:
        source, _ = Source.objects.get_or_create(key=source_key(memory), defaults={"kind": Source.Kind.MEMORY})
        Memory.objects.filter(pk=memory.pk).update(source=source)
        memory.source = source
    changes = {
        "enabled": memory.served,
        "expires_at": memory.expires_at,
        "key": source_key(memory),
        "title": str(memory),
        **memory.scope_fields,
    }
    Source.objects.filter(pk=source.pk).update(**changes)
    for field, value in changes.items():
        setattr(source, field, value)
    return source


def memory_index(*, memory_id: int, config: IndexingConfig | None = None) -> IndexOutcome | None:
    """Embed the memory as one chunk unless its fingerprint is unchanged; None if it was deleted meanwhile."""
    config = config or indexing_config()
    memory = Memory.objects.filter(pk=memory_id).first()
    if memory is None:
        return None
    labels = {"language": "", "symbol": "", "metadata": {"memory": memory.pk}}
    source = memory_source_sync(memory)
    return ingest.item_index_whole(memory, source=source, text=memory.text, labels=labels, config=config)


def memory_index_failed(*, memory_id: int, reason: str) -> None:
    ingest.item_failed(Memory, memory_id, reason)


def memory_delete_source(*, memory_id: int) -> None:
    """Its source and, by cascade, its chunk; read from the database (the caller's copy may predate indexing)."""
    Source.objects.filter(memory__pk=memory_id).delete()
