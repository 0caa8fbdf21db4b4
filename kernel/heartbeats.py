"""Liveness records in Redis (the broker): workers, beat and the recovery sweep.

Each record is a key that expires: a worker that dies simply disappears.
Ages are read from the key's remaining time to live, so they come from the
Redis server's clock alone, never from comparing two machines' clocks.
While Redis is down these records can be neither written nor read; health
then reports the broker down, which is the failure that matters.
"""

import logging
import threading
from collections.abc import Iterable

import redis

from kernel.config import redis_config
from kernel.redis import redis_client as kernel_client

log = logging.getLogger(__name__)

PREFIX = "rag:heartbeat:"
WORKER = "worker:"  # + the worker's hostname
BEAT = "beat"  # beat published a task
SWEEP = "sweep"  # the recovery sweep ran

WORKER_INTERVAL = 10.0  # seconds between a worker's heartbeats
# Six missed heartbeats: the worker is gone or wedged; a little Python
# holding the GIL between torch calls never delays one that long.
WORKER_STALE = 60.0
# Beat publishes the recovery sweep every minute (its default schedule): three missed minutes.
BEAT_STALE = 180.0
_TTL = 24 * 3600  # a record older than this reads as "never"; a worker's expires after WORKER_STALE


def redis_client() -> redis.Redis:
    """The broker's client (kernel.redis: short timeouts, health must answer fast)."""
    return kernel_client(redis_config())


def broker_ping() -> str:
    """ "" when the broker answers PING, else why not."""
    try:
        redis_client().ping()
    except redis.RedisError as exc:
        return str(exc) or type(exc).__name__
    return ""


def queue_lengths(queues: Iterable[str]) -> dict[str, int] | None:
    """Tasks waiting in each Celery queue (a Redis list named after it); None when the broker cannot be read.

    Messages a worker has taken but not yet acknowledged are not in the list: a running task is not counted.
    """
    names = list(queues)
    try:
        with redis_client().pipeline(transaction=False) as pipe:
            for name in names:
                pipe.llen(name)
            return dict(zip(names, map(int, pipe.execute()), strict=True))
    except redis.RedisError:
        return None


def heartbeat_record(name: str, *, ttl: float = _TTL) -> None:
    try:
        redis_client().set(PREFIX + name, 1, px=int(ttl * 1000))
    except redis.RedisError as exc:
        log.debug("heartbeat %s not recorded (broker unreachable): %s", name, exc)


def heartbeat_forget(name: str) -> None:
    try:
        redis_client().delete(PREFIX + name)
    except redis.RedisError:
        pass


def heartbeat_ages(prefix: str = "") -> dict[str, float]:
    """Seconds since each record under ``prefix`` was written, by name; raises RedisError when unreachable.

    One SCAN and one pipelined round trip for every record's PTTL.
    """
    client = redis_client()
    names = sorted(key[len(PREFIX) :] for key in client.scan_iter(match=f"{PREFIX}{prefix}*", count=500))
    pipeline = client.pipeline(transaction=False)
    for name in names:
        pipeline.pttl(PREFIX + name)
    ages = {}
    for name, remaining in zip(names, pipeline.execute(), strict=True):
        if remaining >= 0:  # -2: expired meanwhile
            ttl = WORKER_STALE if name.startswith(WORKER) else _TTL
            ages[name] = round(max(0.0, ttl - remaining / 1000), 1)
    return ages


class WorkerHeartbeat(threading.Thread):
    """Records "worker <hostname> is alive" every WORKER_INTERVAL seconds, until stopped.

    A thread of the worker's main process: it keeps beating while that
    process runs a long task (solo pool) or supervises its children.
    """

    def __init__(self, hostname: str) -> None:
        super().__init__(name="rag-heartbeat", daemon=True)
        self.record = WORKER + hostname
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            heartbeat_record(self.record, ttl=WORKER_STALE)
            self.stopped.wait(WORKER_INTERVAL)

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=2.0)
        heartbeat_forget(self.record)  # a worker that stops cleanly is gone at once
