"""What the memory endpoints answer, shared by the HTTP API (surfaces/routes/memories.py) and MCP (remember,
recall, forget): the caller's identity and the validated request in, the answer schema out.

Reading follows the one scope rule; writing, access.memories' narrower one.
Recall is the ordinary hybrid search over the memory kind only, so it ranks,
fuses and filters (scope, served, unexpired) exactly like /search.
"""

from django.db import transaction

from access.identity import Identity
from access.memories import memories_visible, memory_changeable, memory_readable, memory_write_scope
from kernel.errors import InvalidInput
from kernel.replicas import primary_reads
from retrieval.answers import payload_scope
from retrieval.config import SearchConfig
from retrieval.memory_schemas import (
    ForgetOut,
    MemoryIn,
    MemoryListIn,
    MemoryListOut,
    MemoryOut,
    MemoryPatchIn,
    RecalledOut,
    RecallIn,
    RecallOut,
)
from retrieval.query_language import query_parse
from retrieval.querying import query_run
from sources.memories import Provenance, memory_change, memory_write
from sources.models import Memory, MemoryStatus, Source, memory_status_filter


def _provenance(identity: Identity, *, conversation_id: str = "", citation: str = "") -> Provenance:
    return Provenance(
        author=identity.name, api_key_id=identity.key_id, conversation_id=conversation_id, citation=citation
    )


def memory_remember(identity: Identity, payload: MemoryIn, *, approval_required: bool) -> MemoryOut:
    """POST /memories and the MCP tool ``remember``: a new memory in the caller's scope (or a narrower one asked
    for), superseding ``payload.supersedes`` when given; queued for indexing once committed."""
    scope = memory_write_scope(identity, bot_id=payload.bot_id, client_id=payload.client_id, channels=payload.channels)
    with transaction.atomic():
        old = memory_changeable(identity, payload.supersedes) if payload.supersedes else None
        memory = memory_write(
            text=payload.text,
            scope=scope,
            provenance=_provenance(identity, conversation_id=payload.conversation_id, citation=payload.citation),
            expires_at=payload.expires_at,
            supersedes=old,
            approved=not approval_required,
        )
    return MemoryOut.of(_reloaded(memory.pk))


def memories_list(identity: Identity, query: MemoryListIn) -> MemoryListOut:
    """GET /memories: the caller's visible memories in one state (default active), newest first."""
    memories = memories_visible(identity).select_related("superseded_by")
    if query.status != "all":
        memories = memories.filter(memory_status_filter(query.status))
    if query.conversation_id:
        memories = memories.filter(conversation_id=query.conversation_id)
    return MemoryListOut(memories=[MemoryOut.of(m) for m in memories.order_by("-created_at", "-pk")[: query.limit]])


def memory_detail(identity: Identity, memory_id: int) -> MemoryOut:
    """GET /memories/{id}: any state, so a superseded memory's history can be followed; another scope's: 404."""
    return MemoryOut.of(memory_readable(identity, memory_id))


def memory_update(
    identity: Identity, memory_id: int, payload: MemoryPatchIn, *, approval_required: bool
) -> tuple[MemoryOut, bool]:
    """PATCH /memories/{id}: the current version, and whether it is a new one (a new text supersedes)."""
    sent = payload.model_fields_set
    if not sent:
        raise InvalidInput("nothing to change: send text, conversation_id, citation or expires_at")
    with transaction.atomic():
        memory = memory_changeable(identity, memory_id)
        current = memory_change(
            memory,
            provenance=_provenance(identity),
            text=payload.text,
            expires_at=payload.expires_at,
            expires_at_given="expires_at" in sent,
            citation=payload.citation,
            conversation_id=payload.conversation_id,
            approved=not approval_required,
        )
    return MemoryOut.of(_reloaded(current.pk)), current.pk != memory_id


def memory_forget(identity: Identity, memory_id: int) -> ForgetOut:
    """DELETE /memories/{id} and the MCP tool ``forget``: the memory, its chunk and its source are deleted."""
    with transaction.atomic():
        memory_changeable(identity, memory_id).delete()
    return ForgetOut(id=memory_id)


def memories_recall(identity: Identity, payload: RecallIn, *, config: SearchConfig) -> RecallOut:
    """The MCP tool ``recall``: the served memories closest to ``payload.query``, best first."""
    scope = payload_scope(identity, payload, kinds=[Source.Kind.MEMORY])
    # From the primary, replicas or not: an agent recalls what it remembered a moment ago.
    with primary_reads():
        found = query_run(
            identity, query_parse(payload.query), scope=scope, k=payload.k, group=True, config=config, lines=False
        )
    hits = found.hits
    by_source = {
        m.source_id: m
        for m in Memory.objects.filter(source_id__in=[h.chunk.source_id for h in hits]).select_related("superseded_by")
    }
    recalled = [
        RecalledOut(**MemoryOut.of(by_source[h.chunk.source_id]).model_dump(), score=h.score)
        for h in hits
        if h.chunk.source_id in by_source and by_source[h.chunk.source_id].status == MemoryStatus.ACTIVE
    ]
    return RecallOut(query=payload.query, memories=recalled, warnings=found.warnings)


def _reloaded(memory_id: int) -> Memory:
    # After the write: the index status the queueing set, and the links both ways.
    return Memory.objects.select_related("superseded_by").get(pk=memory_id)
