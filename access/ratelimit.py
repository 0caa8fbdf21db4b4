"""Per-caller rate limits, counted in Redis so every web worker shares one budget."""

import logging
import math
import secrets
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
    """Count one request against ``bucket``; over ``limit`` in the last minute raises 429 with the seconds to wait.

    A sliding one-minute window: a request is served while fewer than
    ``limit`` served requests fall in the 60 seconds before it, whatever the
    clock's minute (a fixed window let a caller send twice the limit across
    a minute's boundary, and made counts depend on when a run started). The
    count and the add are one MULTI, so concurrent workers never both take
    the last request; a refused request is taken back out, so the caller is
    served again once its oldest served request is a minute old. When Redis
    cannot be reached the request is let through and logged: losing the
    broker must not take search down with it.
    """
    if limit <= 0:
        return
    try:
        now = time.time()
        count, member = _event_add(bucket, now)
        if count <= limit:
            return
        client = redis_client()
        client.zrem(_key(bucket), member)
        retry_after = _retry_after(bucket, limit=limit, now=now)
    except redis.RedisError as exc:
        log.warning("rate limit not checked (Redis unreachable): %s", exc)
        return
    raise _cooldown(f"rate limit exceeded: {limit} requests per minute", retry_after)


def rate_limit_count(*, bucket: str) -> int:
    """Count one event against ``bucket``; returns the events of the last minute, this one included. Raises
    RedisError."""
    return _event_add(bucket, time.time())[0]


def rate_limit_peek(*, bucket: str, limit: int, message: str) -> None:
    """Raise 429 (``message``, the seconds to wait) when ``bucket`` already holds ``limit`` events of the last
    minute.

    Counts nothing: for limits on what a request turns out to be (a refusal),
    checked before the request is served. Lets it through when Redis cannot
    be reached, as rate_limit_check does.
    """
    if limit <= 0:
        return
    try:
        now = time.time()
        count = redis_client().zcount(_key(bucket), f"({now - WINDOW_SECONDS}", "+inf")
        if count < limit:
            return
        retry_after = _retry_after(bucket, limit=limit, now=now)
    except redis.RedisError as exc:
        log.warning("rate limit not checked (Redis unreachable): %s", exc)
        return
    raise _cooldown(message, retry_after)


def _key(bucket: str) -> str:
    return f"rag:limit:{bucket}"  # a sorted set of the events; the fixed windows were rag:rate:<bucket>:<minute>


def _event_add(bucket: str, now: float) -> tuple[int, str]:
    """Record one event at ``now`` (dropping those a minute old); returns the window's count and the event's member."""
    key, member = _key(bucket), f"{now:.6f}:{secrets.token_hex(4)}"
    pipe = redis_client().pipeline()  # MULTI ... EXEC: each caller's count includes every event added before it
    pipe.zremrangebyscore(key, "-inf", now - WINDOW_SECONDS)
    pipe.zadd(key, {member: now})
    pipe.zcard(key)
    pipe.expire(key, WINDOW_SECONDS + 1)
    return int(pipe.execute()[2]), member


def _retry_after(bucket: str, *, limit: int, now: float) -> int:
    """Seconds until the window holds fewer than ``limit`` events: when the ``limit``-th newest is a minute old."""
    newest = redis_client().zrange(_key(bucket), -limit, -limit, withscores=True)
    if not newest:
        return 1
    return max(1, math.ceil(float(newest[0][1]) + WINDOW_SECONDS - now))


def _cooldown(message: str, retry_after: int) -> Cooldown:
    return Cooldown(f"{message}; retry in {retry_after} s", details={"retry_after_seconds": retry_after})
