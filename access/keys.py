"""API keys: created once and shown once, stored as a public prefix and a hash, checked in constant time."""

import hashlib
import hmac
import secrets
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from access.models import ApiKey
from kernel.errors import NotFound, Unauthenticated

KEY_START = "rag_"
# last_used_at is written at most this often per key, not on every request.
_LAST_USED_RESOLUTION = timedelta(seconds=60)


def _digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


@transaction.atomic
def api_key_create(
    *,
    name: str,
    bot_id: str = "",
    client_id: str = "",
    channels: str = "",
    can_manage: bool = False,
    expires_at: datetime | None = None,
    rate_limit_per_minute: int | None = None,
    created_by=None,
) -> tuple[ApiKey, str]:
    """A new key row and the key itself (``rag_<prefix>_<secret>``), which is not stored and cannot be shown again."""
    key = ApiKey(
        name=name,
        bot_id=bot_id,
        client_id=client_id,
        channels=channels,
        can_manage=can_manage,
        expires_at=expires_at,
        rate_limit_per_minute=rate_limit_per_minute,
        created_by=created_by,
    )
    raw = api_key_assign(key)
    key.full_clean()  # the scope names follow the same rules as in the admin
    key.save()
    return key, raw


def api_key_assign(key: ApiKey) -> str:
    """Give an unsaved key its prefix and hash; returns the key, to show once."""
    prefix = secrets.token_hex(4)
    raw = f"{KEY_START}{prefix}_{secrets.token_urlsafe(24)}"  # 192 random bits
    key.prefix, key.key_hash = prefix, _digest(raw)
    return raw


def api_key_authenticate(raw: str) -> ApiKey:
    """The active key for ``raw``, or ApplicationError(401) saying why not (never echoing the key)."""
    prefix = raw[len(KEY_START) :].split("_", 1)[0] if raw.startswith(KEY_START) else ""
    key = ApiKey.objects.filter(prefix=prefix).first() if prefix else None
    # Compared in constant time, and compared even when no row matched, so
    # the answer takes as long for an unknown prefix as for a wrong secret.
    matches = hmac.compare_digest(key.key_hash if key else _digest(""), _digest(raw))
    if key is None or not matches:
        raise Unauthenticated("invalid API key")
    now = timezone.now()
    if key.revoked_at is not None:
        raise Unauthenticated(f"API key {key.prefix} was revoked")
    if key.expires_at is not None and key.expires_at <= now:
        raise Unauthenticated(f"API key {key.prefix} expired at {key.expires_at.isoformat()}")
    if key.last_used_at is None or now - key.last_used_at >= _LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
    return key


def api_key_revoke(*, prefix: str) -> ApiKey:
    key = ApiKey.objects.filter(prefix=prefix).first()
    if key is None:
        raise NotFound(f"no API key with prefix {prefix!r}")
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
    return key
