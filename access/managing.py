"""Where an identity may manage: its rights (``access.rights``) applied to the rows and scopes its grants cover.

People manage only inside their grants, as the admin console lets them:
lists show the rows their scope shows, another's row answers 404 (as a
missing one), and what they write goes only to bots, clients and channels
they act for, naming some of each their grants name (no channel is every
channel: ``scope_not_wider``). API keys with the manage permission manage
every row (their one switch, unchanged); superusers too. Writing the shared scope, a new row
or a change to an existing one, takes ``Right.WRITE_SHARED`` besides.
"""

from collections.abc import Iterable, Mapping
from typing import TypeVar

from django.db.models import Model, QuerySet

from access.identity import Identity, scope_for
from access.rights import Right, is_shared, right_refused
from kernel.errors import Forbidden, NotFound
from sources.models import words

Row = TypeVar("Row", bound=Model)


def manages_every_row(identity: Identity) -> bool:
    """Whether ``identity`` manages every row whatever its scope: a manage key, or a superuser."""
    return _every_row(identity)


def _every_row(identity: Identity) -> bool:
    # A manage key keeps its one switch: every row, whatever its own bot. A superuser's scope is everything.
    return identity.kind == "key" or (
        identity.bot_ids is None and identity.client_ids is None and identity.channels is None
    )


def rows_managed(identity: Identity, rows: QuerySet[Row], *, right: Right, source_path: str) -> QuerySet[Row]:
    """``rows`` narrowed to those ``identity`` may manage with ``right`` (Forbidden without it).

    ``source_path`` reaches a row's Source ("source", "root__source"): a row is in scope when its source is,
    disabled ones included (managing covers them).
    """
    identity.require(right)
    if _every_row(identity):
        return rows
    visible = scope_for(identity).source_ids_sql(enabled_only=False)
    return rows.filter(**{f"{source_path}__in": visible})


def row_managed(identity: Identity, rows: QuerySet[Row], pk: int, *, right: Right, source_path: str, what: str) -> Row:
    """The row ``pk`` of ``rows`` if ``identity`` may manage it with ``right``; NotFound for another's or a missing
    one (the same answer: a person learns nothing of rows outside their grants)."""
    row = rows_managed(identity, rows, right=right, source_path=source_path).filter(pk=pk).first()
    if row is None:
        raise NotFound(f"{what} {pk} does not exist")
    return row


def scope_writable(identity: Identity, *, bot_id: str, client_id: str, channels: str | Iterable[str]) -> None:
    """Forbidden unless ``identity`` may give a row this scope: within its grants (people), and shared only with
    ``Right.WRITE_SHARED``. ``channels``: words or a list; empty values mean "none" (for shared: everyone)."""
    named = words(channels) if isinstance(channels, str) else list(channels)
    if not _every_row(identity):
        # The same refusal as a search asking beyond its grants (403 naming the field).
        scope_for(identity, bot_id=bot_id or None, client_id=client_id or None, channels=named or None)
        scope_not_wider(identity, bot_id=bot_id, client_id=client_id, channels=named)
    shared_writable(identity, bot_id=bot_id, client_id=client_id, channels=named)


def scope_not_wider(identity: Identity, *, bot_id: str, client_id: str, channels: str | Iterable[str]) -> None:
    """Forbidden when a row of this scope would be read beyond ``identity``'s grants: an empty bot, client or channel
    list is "every one", so a person bound to some (granted bot alpha, channel ops) names some of them, as
    ``access.memories`` makes a caller write a memory.

    A person granted (alpha, ops) giving a document to bot alpha with no channel would have every channel of alpha
    read it (finance too). The shared scope itself (all three empty) is ``shared_writable``'s; whoever holds
    ``Right.WRITE_SHARED`` may give a row to everyone, so a narrower one too. Manage keys and superusers: any scope.
    """
    named = words(channels) if isinstance(channels, str) else list(channels)
    if _every_row(identity) or identity.may(Right.WRITE_SHARED):
        return
    if is_shared(bot_id=bot_id, client_id=client_id, channels=named):
        return  # refused by shared_writable, with the permission's name
    bound = (
        ("bot_id", "bot", bool(bot_id), identity.bot_ids),
        ("client_id", "client", bool(client_id), identity.client_ids),
        ("channels", "channel", bool(named), identity.channels),
    )
    for field, what, given, allowed in bound:
        if not given and allowed:
            raise Forbidden(
                f"{identity.name} may not leave the {what} empty: every {what} would read it, beyond its grants; "
                f"name {'some' if field == 'channels' else 'one'} of {', '.join(sorted(allowed))}",
                details={"field": field, "refused": []},
            )


def shared_writable(identity: Identity, *, bot_id: str, client_id: str, channels: str | Iterable[str]) -> None:
    """Forbidden when the scope is the shared one and ``identity`` lacks ``Right.WRITE_SHARED``."""
    if is_shared(bot_id=bot_id, client_id=client_id, channels=channels) and not identity.may(Right.WRITE_SHARED):
        raise right_refused(
            name=identity.name,
            kind=identity.kind,
            right=Right.WRITE_SHARED,
            hint="; name a bot, client or channel it acts for instead",
            field="bot_id",
        )


# A refusal's ``field`` (scope_for's details), in the words a form's message uses.
FIELD_WORDS = {"bot_id": "bot", "client_id": "client", "channels": "channel"}


def form_scope_refused(identity: Identity, cleaned: Mapping, *, not_wider: bool) -> Forbidden | None:
    """Why a form's bot, client and channels (``cleaned``) go beyond ``identity``'s grants, or None.

    The one check of every admin form that gives a row a scope; ``not_wider``: an empty field (every one) is refused
    too (``scope_not_wider``), as for rows others read; a key without a scope sees shared sources only, so its form
    leaves it out."""
    try:
        scope_for(
            identity,
            bot_id=cleaned.get("bot_id") or None,
            client_id=cleaned.get("client_id") or None,
            channels=words(cleaned.get("channels") or "") or None,
        )
        if not_wider:
            scope_not_wider(
                identity,
                bot_id=cleaned.get("bot_id") or "",
                client_id=cleaned.get("client_id") or "",
                channels=cleaned.get("channels") or "",
            )
    except Forbidden as exc:
        return exc
    return None
