"""The one Redis client factory: the LLM breaker, rate limits and sign-in throttles, heartbeats and health.

One client (one connection pool) per configuration and process, made on
first use; redis-py's pool notices a fork and reconnects in the child.
Every user reads Redis on a request's or a health check's path and has a
fallback when it is away (the breaker keeps its state in the process, a rate
limit lets the request through, sign-in refuses, health reports the broker
down), so every client gives up fast and the same way.
"""

import threading
from dataclasses import dataclass

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

# One timeout for every purpose. Each user has a fallback for an unreachable
# Redis, and a local Redis answers in well under a millisecond: half a second
# only ever runs out when Redis is gone. (Heartbeats and health had 1 s; a
# slower verdict on a dead broker bought them nothing.)
TIMEOUT_SECONDS = 0.5


@dataclass(frozen=True, slots=True)
class RedisConfig:
    url: str
    timeout: float = TIMEOUT_SECONDS


_clients: dict[RedisConfig, redis.Redis] = {}
_lock = threading.Lock()


def redis_connect(config: RedisConfig) -> redis.Redis:
    """A new client: ``timeout`` to connect and per command, and one immediate retry (for a connection gone stale
    across a Redis restart) instead of redis-py's default backoff, seconds per command. Replies are decoded text."""
    return redis.Redis.from_url(
        config.url,
        socket_timeout=config.timeout,
        socket_connect_timeout=config.timeout,
        decode_responses=True,
        retry=Retry(NoBackoff(), 1),
    )


def redis_client(config: RedisConfig) -> redis.Redis:
    """This process's client for ``config``."""
    with _lock:
        client = _clients.get(config)
        if client is None:
            client = _clients[config] = redis_connect(config)
        return client
