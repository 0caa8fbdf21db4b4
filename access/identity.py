"""Identity and scope: who is asking, and the one rule that turns that into what they may see.

An identity comes from credentials only: an API key (bots, agents), a
signed-in Django account (people), or nobody (anonymous). A request body
may narrow the identity's scope (one of its bots, fewer channels) but never
widen it. Every surface (search, skills, tools, the page, context, MCP)
gets its SQL filter from ``scope_for``.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Q

from access.models import AccessGrant, ApiKey
from access.rights import Right, right_refused, rights_for_key, rights_for_user
from access.scope import Scope
from kernel.errors import Forbidden
from sources.models import words


@dataclass(frozen=True, slots=True)
class Identity:
    """Who is asking. ``None`` in a dimension: any value (superusers)."""

    kind: str  # "anonymous", "key" or "user"
    name: str  # for messages and logs: never a secret
    bot_ids: frozenset[str] | None = frozenset()
    client_ids: frozenset[str] | None = frozenset()
    channels: frozenset[str] | None = frozenset()
    rights: frozenset[Right] = frozenset()  # what it may manage (access.rights), within its scope
    rate_bucket: str = ""  # the rate limit's counter
    rate_limit: int = 0  # requests per minute; 0 = none
    key_id: int | None = None  # the API key's row: what a memory it writes records as its author

    @property
    def is_anonymous(self) -> bool:
        return self.kind == "anonymous"

    def may(self, right: Right) -> bool:
        return right in self.rights

    def require(self, right: Right) -> None:
        """Forbidden, naming the missing permission, unless the identity holds ``right``."""
        if right not in self.rights:
            raise right_refused(name=self.name, kind=self.kind, right=right)


def identity_anonymous(*, address: str = "") -> Identity:
    return Identity(
        kind="anonymous",
        name="anonymous",
        rate_bucket=f"anon:{address}",
        rate_limit=settings.RAG_RATE_LIMIT_ANONYMOUS_PER_MINUTE,
    )


def identity_for_key(key: ApiKey) -> Identity:
    limit = settings.RAG_RATE_LIMIT_PER_MINUTE if key.rate_limit_per_minute is None else key.rate_limit_per_minute
    return Identity(
        kind="key",
        name=f"API key {key.prefix}",
        bot_ids=frozenset([key.bot_id] if key.bot_id else []),
        client_ids=frozenset([key.client_id] if key.client_id else []),
        channels=frozenset(words(key.channels)),
        rights=rights_for_key(can_manage=key.can_manage),
        rate_bucket=f"key:{key.pk}",
        rate_limit=limit,
        key_id=key.pk,
    )


def identity_for_user(user) -> Identity:
    """A signed-in person: shared sources plus what their account and groups are granted.

    Superusers see everything. What a person may manage is what the admin lets them do (``access.rights``):
    staff status alone gives nothing.
    """
    name = f"user {user.get_username()}"
    common: dict[str, Any] = {
        "kind": "user",
        "name": name,
        "rights": rights_for_user(user),
        "rate_bucket": f"user:{user.pk}",
        "rate_limit": settings.RAG_RATE_LIMIT_PER_MINUTE,
    }
    if user.is_superuser:
        return Identity(bot_ids=None, client_ids=None, channels=None, **common)
    grants = AccessGrant.objects.filter(Q(user=user) | Q(group__in=user.groups.all())).values_list(
        "bot_id", "client_id", "channels"
    )
    bots, clients, channels = set(), set(), set()
    for bot_id, client_id, granted_channels in grants:
        bots.update([bot_id] if bot_id else [])
        clients.update([client_id] if client_id else [])
        channels.update(words(granted_channels))
    return Identity(bot_ids=frozenset(bots), client_ids=frozenset(clients), channels=frozenset(channels), **common)


def scope_for(
    identity: Identity,
    *,
    bot_id: str | None = None,
    client_id: str | None = None,
    channels: Iterable[str] | None = None,
    kinds: Iterable[str] = (),
) -> Scope:
    """The SQL scope of ``identity``, narrowed by what a request asks for.

    ``bot_id``, ``client_id`` and ``channels`` (None or "": not asked) must
    be within what the identity may see; asking for more is refused with
    403, never silently widened or ignored.
    """
    return Scope(
        bot_ids=_narrowed(identity.bot_ids, [bot_id] if bot_id else None, what="bot", identity=identity),
        client_ids=_narrowed(identity.client_ids, [client_id] if client_id else None, what="client", identity=identity),
        channels=_narrowed(
            identity.channels, None if channels is None else list(channels), what="channel", identity=identity
        ),
        kinds=tuple(kinds),
    )


def _narrowed(
    allowed: frozenset[str] | None, asked: list[str] | None, *, what: str, identity: Identity
) -> tuple[str, ...] | None:
    if asked is None:
        return None if allowed is None else tuple(sorted(allowed))
    refused = sorted(set(asked) - allowed) if allowed is not None else []
    if refused and allowed is not None:
        may = ", ".join(sorted(allowed)) or f"shared sources only, no {what}"
        raise Forbidden(
            f"{identity.name} may not act for {what} {', '.join(map(repr, refused))} (it may see: {may})",
            details={"field": f"{what}_id" if what != "channel" else "channels", "refused": refused},
        )
    return tuple(sorted(set(asked)))
