"""Where an identity may manage: its rights (``access.rights``) applied to the rows and scopes its grants cover.

People manage only inside their grants, as the admin console lets them:
lists show the rows their scope shows, another's row answers 404 (as a
missing one), and what they write goes only to bots, clients and channels
they act for. API keys with the manage permission manage every row (their
one switch, unchanged); superusers too. Writing the shared scope, a new row
or a change to an existing one, takes ``Right.WRITE_SHARED`` besides.
"""

from collections.abc import Iterable
from typing import TypeVar

from django.db.models import Model, QuerySet

from access.identity import Identity, scope_for
from access.rights import Right, is_shared, right_refused
from kernel.errors import NotFound
from sources.models import words

Row = TypeVar("Row", bound=Model)


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
    shared_writable(identity, bot_id=bot_id, client_id=client_id, channels=named)


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
