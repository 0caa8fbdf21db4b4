"""Per-caller rate limits, counted in Redis so every web worker shares one budget."""

import logging
import time

import redis

from kernel.config import redis_config
from kernel.errors import Cooldown
from kernel.redis import redis_client as kernel_client

log = logging.getLogger(__name__)

WINDOW_SECONDS = 60


def redis_client() -> redis.Redis:
    """The broker's client (kernel.redis: short timeouts, a limit never hangs a request)."""
    return kernel_client(redis_config())


def rate_limit_check(*, bucket: str, limit: int) -> None:
    """Count one request against ``bucket``; over ``limit`` per minute raises 429 with the seconds to wait.

    A fixed one-minute window: one INCR (atomic, so concurrent workers never
    both take the last request) and an EXPIRE on the window's first hit.
    When Redis cannot be reached the request is let through and logged:
    losing the broker must not take search down with it.
    """
    if limit <= 0:
        return
    try:
        count = rate_limit_count(bucket=bucket)
    except redis.RedisError as exc:
        log.warning("rate limit not checked (Redis unreachable): %s", exc)
        return
    if count > limit:
        raise _cooldown(f"rate limit exceeded: {limit} requests per minute")


def rate_limit_count(*, bucket: str) -> int:
    """Count one event against ``bucket`` in this minute's window; returns the window's count. Raises RedisError."""
    key = _window_key(bucket, time.time())
    pipe = redis_client().pipeline()
    pipe.incr(key)
    pipe.expire(key, WINDOW_SECONDS * 2, nx=True)
    return pipe.execute()[0]


def rate_limit_peek(*, bucket: str, limit: int, message: str) -> None:
    """Raise 429 (``message``, the seconds to wait) when ``bucket`` already holds more than ``limit`` events this
    minute.

    Counts nothing: for limits on what a request turns out to be (a refusal),
    checked before the request is served. Lets it through when Redis cannot
    be reached, as rate_limit_check does.
    """
    if limit <= 0:
        return
    try:
        count = int(redis_client().get(_window_key(bucket, time.time())) or 0)
    except redis.RedisError as exc:
        log.warning("rate limit not checked (Redis unreachable): %s", exc)
        return
    if count >= limit:
        raise _cooldown(message)


def _window_key(bucket: str, now: float) -> str:
    return f"rag:rate:{bucket}:{int(now // WINDOW_SECONDS)}"


def _cooldown(message: str) -> Cooldown:
    now = time.time()
    retry_after = max(1, int((int(now // WINDOW_SECONDS) + 1) * WINDOW_SECONDS - now + 0.999))
    return Cooldown(f"{message}; retry in {retry_after} s", details={"retry_after_seconds": retry_after})
