"""Per-caller rate limits, counted in Redis so every web worker shares one budget."""

import logging
import time

import redis
from django.conf import settings

from rag_site.errors import Cooldown

log = logging.getLogger(__name__)

WINDOW_SECONDS = 60
_client: redis.Redis | None = None


def _redis() -> redis.Redis:
    global _client
    if _client is None:  # one connection pool per process, made on first use
        _client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=0.5, socket_connect_timeout=0.5)
    return _client


def rate_limit_check(*, bucket: str, limit: int) -> None:
    """Count one request against ``bucket``; over ``limit`` per minute raises 429 with the seconds to wait.

    A fixed one-minute window: one INCR (atomic, so concurrent workers never
    both take the last request) and an EXPIRE on the window's first hit.
    When Redis cannot be reached the request is let through and logged:
    losing the broker must not take search down with it.
    """
    if limit <= 0:
        return
    now = time.time()
    window = int(now // WINDOW_SECONDS)
    key = f"rag:rate:{bucket}:{window}"
    try:
        pipe = _redis().pipeline()
        pipe.incr(key)
        pipe.expire(key, WINDOW_SECONDS * 2, nx=True)
        count = pipe.execute()[0]
    except redis.RedisError as exc:
        log.warning("rate limit not checked (Redis unreachable): %s", exc)
        return
    if count > limit:
        retry_after = max(1, int((window + 1) * WINDOW_SECONDS - now + 0.999))
        raise Cooldown(
            f"rate limit exceeded: {limit} requests per minute; retry in {retry_after} s",
            details={"retry_after_seconds": retry_after},
        )
