"""What an identity may manage: one right per action, decided here for every surface (API, MCP, admin).

A person's rights are the Django permissions the admin checks for the same
action, held while the admin would let them in at all (an active staff
account); superusers hold every one. Staff status alone gives none. An API
key holds every right when it was created with the manage permission, and
none otherwise. Where a right is used on rows, a person's grants still
bound it (``access.managing``): the right says what, the grants say whose.

``WRITE_SHARED`` is the right to give something to everyone (no bot, no
client, no channel: what every caller reads). Writing within one's own bot,
client or channel needs no right; writing shared is never what an identity
gets by having no bot.
"""

from collections.abc import Iterable
from enum import StrEnum

from django.contrib.auth.models import AbstractUser, AnonymousUser

from kernel.errors import Forbidden
from sources.models import words


class Right(StrEnum):
    """A right, named as the Django permission that grants it to a person ("app_label.codename")."""

    VIEW_ROOTS = "sources.view_workspaceroot"
    REINDEX_ROOTS = "sources.change_workspaceroot"  # the admin's re-index button and actions need it too
    VIEW_JOBS = "sources.view_indexjob"
    VIEW_DOCUMENTS = "sources.view_uploadeddocument"
    ADD_DOCUMENTS = "sources.add_uploadeddocument"
    DELETE_DOCUMENTS = "sources.delete_uploadeddocument"
    VIEW_HEALTH_DETAILS = "access.view_health_details"
    WRITE_SHARED = "access.write_shared"


ALL_RIGHTS = frozenset(Right)

# For refusals: what the right lets one do, in a few words.
DOING = {
    Right.VIEW_ROOTS: "list workspace roots",
    Right.REINDEX_ROOTS: "re-index roots",
    Right.VIEW_JOBS: "read index jobs",
    Right.VIEW_DOCUMENTS: "list uploaded documents",
    Right.ADD_DOCUMENTS: "upload documents",
    Right.DELETE_DOCUMENTS: "delete uploaded documents",
    Right.VIEW_HEALTH_DETAILS: "read the health checks' details",
    Right.WRITE_SHARED: "write to the shared scope (no bot, client or channel: every caller reads it)",
}


def rights_for_user(user: AbstractUser | AnonymousUser) -> frozenset[Right]:
    """The rights of a signed-in person: the admin's permissions for the same actions, for active staff only."""
    if not user.is_active:
        return frozenset()
    if user.is_superuser:
        return ALL_RIGHTS
    if not user.is_staff:
        return frozenset()  # the admin lets them do nothing, so the API does not either
    return frozenset(right for right in Right if user.has_perm(right.value))


def rights_for_key(*, can_manage: bool) -> frozenset[Right]:
    """An API key's rights: all of them with the manage permission (keys keep that one switch), else none."""
    return ALL_RIGHTS if can_manage else frozenset()


def right_refused(*, name: str, kind: str, right: Right, hint: str = "", field: str = "") -> Forbidden:
    """The refusal of ``right`` to the identity ``name``: which permission is missing and who gives it."""
    how = (
        "an API key created with --manage (or ticked 'manage permission' in the admin)"
        if kind == "key"
        else "an admin gives it on the user's or a group's page; staff status alone grants nothing"
    )
    return Forbidden(
        f"{name} may not {DOING[right]}: it lacks the permission {right.value} ({how}){hint}",
        details={"permission": right.value, **({"field": field} if field else {})},
    )


def is_shared(*, bot_id: str, client_id: str, channels: str | Iterable[str]) -> bool:
    """Whether a scope is the shared one: no bot, no client, no channel (every caller reads it)."""
    named = words(channels) if isinstance(channels, str) else list(channels)
    return not bot_id and not client_id and not named
