"""Who may write which memory: a caller writes only within its own scope, and reads what the one scope rule shows.

Reading a memory is reading any source (``scope_for``). Writing is
narrower: a memory must be invisible to anyone the caller could not reach
itself, so a key for bot alpha never writes a shared memory (every bot would
read it) nor one for bot beta, and a key limited to channel ops never writes
an ungated one. A shared memory (no bot, client or channel: every caller
reads it) takes the right to write the shared scope (``Right.WRITE_SHARED``:
a manage key, a superuser, or a person given ``access.write_shared``),
never just the absence of a bot. The same rule decides which existing
memories a caller may change, supersede or forget: those it could have
written. Anonymous callers write nothing.
"""

from collections.abc import Iterable

from django.db.models import QuerySet

from access.identity import Identity, scope_for
from access.managing import shared_writable
from access.rights import Right, is_shared, right_refused
from kernel.errors import Forbidden, InvalidInput, NotFound
from sources.memories import MemoryScope
from sources.models import Memory, Source, words


def memory_write_scope(
    identity: Identity,
    *,
    bot_id: str | None = None,
    client_id: str | None = None,
    channels: Iterable[str] | None = None,
) -> MemoryScope:
    """The scope of a memory ``identity`` writes, narrowed by what it asks for (None or "": not asked).

    Unasked, a dimension is the caller's own: its one bot and client, every channel it has. Asking beyond the
    caller's own is refused (403), like a search asking for more.
    """
    if identity.is_anonymous:
        raise Forbidden("an anonymous caller cannot write memories: send an API key")
    asked_channels = None if channels is None else sorted(set(channels))
    scope = MemoryScope(
        bot_id=_one(identity, identity.bot_ids, bot_id, what="bot", field="bot_id"),
        client_id=_one(identity, identity.client_ids, client_id, what="client", field="client_id"),
        channels=_channels(identity, asked_channels),
    )
    shared_writable(identity, bot_id=scope.bot_id, client_id=scope.client_id, channels=scope.channels)
    return scope


def _one(identity: Identity, allowed: frozenset[str] | None, asked: str | None, *, what: str, field: str) -> str:
    if asked:
        if allowed is not None and asked not in allowed:
            may = ", ".join(sorted(allowed)) or f"shared memories only, no {what}"
            raise Forbidden(
                f"{identity.name} may not write for {what} {asked!r} (it may write for: {may})",
                details={"field": field, "refused": [asked]},
            )
        return asked
    if not allowed:  # a superuser (None), or a caller of no bot: shared
        return ""
    if len(allowed) == 1:
        return next(iter(allowed))
    raise InvalidInput(
        f"{identity.name} acts for several {what}s ({', '.join(sorted(allowed))}): name one with {field}",
        details={"field": field},
    )


def _channels(identity: Identity, asked: list[str] | None) -> tuple[str, ...]:
    allowed = identity.channels
    if asked is None:
        return () if allowed is None else tuple(sorted(allowed))
    if allowed is not None:
        refused = sorted(set(asked) - allowed)
        if refused:
            raise Forbidden(
                f"{identity.name} may not write for channel {', '.join(map(repr, refused))} "
                f"(it may write for: {', '.join(sorted(allowed)) or 'no channel, ungated memories only'})",
                details={"field": "channels", "refused": refused},
            )
        if allowed and not asked:
            raise Forbidden(
                f"{identity.name} may not write an ungated memory (channels []): every channel would read it; "
                f"name some of {', '.join(sorted(allowed))}",
                details={"field": "channels", "refused": []},
            )
    return tuple(asked)


def memory_writable(identity: Identity, memory: Memory) -> bool:
    """Whether ``identity`` could have written ``memory`` as it is scoped: then it may change or forget it."""
    if identity.is_anonymous:
        return False
    if _shared(memory) and not identity.may(Right.WRITE_SHARED):
        return False

    def fits(allowed: frozenset[str] | None, value: str) -> bool:
        if allowed is None:
            return True
        return value in allowed if value else not allowed

    channels = set(words(memory.channels))
    channels_fit = identity.channels is None or (
        channels <= identity.channels and (bool(channels) or not identity.channels)
    )
    return fits(identity.bot_ids, memory.bot_id) and fits(identity.client_ids, memory.client_id) and channels_fit


def _shared(memory: Memory) -> bool:
    return is_shared(bot_id=memory.bot_id, client_id=memory.client_id, channels=memory.channels)


def memories_visible(identity: Identity) -> QuerySet[Memory]:
    """The memories ``identity`` may read, whatever their state (superseded, expired and pending ones too: history)."""
    scope = scope_for(identity, kinds=[Source.Kind.MEMORY])
    return Memory.objects.filter(source__in=scope.source_ids_sql(enabled_only=False))


def memory_readable(identity: Identity, memory_id: int) -> Memory:
    """One memory ``identity`` may read, or NotFound (the same answer whether it is another scope's or missing)."""
    memory = memories_visible(identity).select_related("supersedes", "superseded_by").filter(pk=memory_id).first()
    if memory is None:
        raise NotFound(f"memory {memory_id} does not exist")
    return memory


def memory_changeable(identity: Identity, memory_id: int) -> Memory:
    """One memory ``identity`` may change or forget: NotFound when it may not read it, Forbidden when it may only
    read it (a shared memory, for a key of one bot or a person without ``access.write_shared``)."""
    memory = memory_readable(identity, memory_id)
    if _shared(memory) and not identity.may(Right.WRITE_SHARED):
        raise right_refused(
            name=identity.name,
            kind=identity.kind,
            right=Right.WRITE_SHARED,
            hint=f"; it may read memory {memory_id}, which is shared, but not change it",
        )
    if not memory_writable(identity, memory):
        raise Forbidden(
            f"{identity.name} may read memory {memory_id} but not change it: it is scoped to "
            f"{memory.scope_label}, beyond what this caller writes for",
            details={"memory": memory_id},
        )
    return memory
