"""A circuit breaker per language model, shared by every process through Redis, and the model's recent health.

A model whose retries ran out is *open* for a cooldown: every web and worker
process skips it and goes to the next model of its chain. When the cooldown
ends the model is *half-open*: the first process to ask gets it for one
trial call (a lease in Redis, so only one), the others keep skipping it; a
success closes it, a failure opens it again.

The same keys hold what an operator needs to judge a model: errors of the
last minutes by class, the last error, and the latency of recent successful
calls. When Redis cannot be reached, a breaker keeps all this in the process
instead (``shared`` is then False): calls go on, each process judging alone.
"""

import builtins
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from enum import StrEnum

import redis

log = logging.getLogger(__name__)

PREFIX = "rag:llm"
# Successful calls whose latency is kept per model: enough for a steady p95,
# few enough to read on every health request.
LATENCY_SAMPLES = 200
# Errors are counted in one-minute buckets; "recent" means the last this many.
RECENT_MINUTES = 15
# After one Redis failure a process keeps to its own state this long, rather
# than paying a connection timeout on every call while Redis is away.
REDIS_RETRY_SECONDS = 5.0
# An open model's record outlives its cooldown this long (half-open until a
# call settles it), then expires: a model nobody calls any more reads closed.
RECORD_TTL_SECONDS = 86_400


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"


@dataclass(frozen=True)
class Admission:
    """May a call use the model now; ``probe``: it is the one trial of a half-open model."""

    allowed: bool
    probe: bool = False
    opened_until: float | None = None


@dataclass(frozen=True)
class ModelStatus:
    model: str
    state: BreakerState
    opened_until: float | None  # seconds since the epoch
    reason: str  # why it was opened last
    errors: dict[str, int]  # of the last RECENT_MINUTES, by class
    last_error: str
    last_error_at: float | None
    latency_samples: int
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    latency_mean_ms: float | None
    shared: bool  # False: Redis was unreachable, this is one process's view

    def as_dict(self) -> dict:
        return {**asdict(self), "state": str(self.state)}


class Breaker:
    """Per-model breaker state and health, in Redis (``redis_client``) or, failing that, in this process.

    ``redis_client`` gives the shared client (kernel.redis); None keeps the
    state in this process alone.

    ``clock`` gives seconds since the epoch: opened-until times are compared
    across processes, so it is wall time, injectable for tests.
    """

    def __init__(
        self,
        *,
        redis_client: Callable[[], redis.Redis] | None,
        clock: Callable[[], float] = time.time,
        prefix: str = PREFIX,
    ) -> None:
        self._redis_client = redis_client
        self._clock = clock
        self._prefix = prefix
        self._local = _MemoryStore()
        self._redis_down_until = 0.0

    def now(self) -> float:
        return self._clock()

    # --- the breaker ------------------------------------------------------
    def admit(self, model: str, *, probe_seconds: float) -> Admission:
        """Closed: go. Open: skip. Half-open: go as the probe if no other call holds the lease, else skip."""
        record = self._run(lambda store: store.hgetall(self._key("breaker", model)))
        opened_until = _float(record.get("opened_until"))
        if opened_until is None:
            return Admission(allowed=True)
        if self._clock() < opened_until:
            return Admission(allowed=False, opened_until=opened_until)
        # Half-open: the lease expires on its own, so a probe whose process died frees the model.
        leased = self._run(
            lambda store: store.set(self._key("probe", model), "1", nx=True, px=max(1, int(probe_seconds * 1000)))
        )
        return Admission(allowed=bool(leased), probe=bool(leased), opened_until=opened_until)

    def trip(self, model: str, *, seconds: float, reason: str) -> float:
        """Open ``model`` for ``seconds``; returns when it becomes half-open."""
        now = self._clock()
        until = now + seconds
        key = self._key("breaker", model)

        def write(store):
            pipe = store.pipeline()
            pipe.hset(key, mapping={"opened_until": repr(until), "opened_at": repr(now), "reason": reason[:300]})
            pipe.expire(key, int(seconds) + RECORD_TTL_SECONDS)
            pipe.delete(self._key("probe", model))
            pipe.sadd(self._key("models"), model)
            pipe.execute()

        self._run(write)
        log.warning("LLM model %s is skipped for %.0f s: %s", model, seconds, reason)
        return until

    def close(self, model: str) -> None:
        self._run(lambda store: store.delete(self._key("breaker", model), self._key("probe", model)))

    # --- health -------------------------------------------------------------
    def record_success(self, model: str, *, latency_seconds: float) -> None:
        """A call answered: note its latency, and close the model (it works, whatever another process saw)."""
        latencies = self._key("latency", model)

        def write(store):
            pipe = store.pipeline()
            pipe.lpush(latencies, f"{latency_seconds * 1000:.1f}")
            pipe.ltrim(latencies, 0, LATENCY_SAMPLES - 1)
            pipe.delete(self._key("breaker", model), self._key("probe", model))
            pipe.sadd(self._key("models"), model)
            pipe.execute()

        self._run(write)

    def record_error(self, model: str, *, kind: str, message: str) -> None:
        now = self._clock()
        bucket = self._key("errors", model, str(int(now // 60)))
        info = self._key("info", model)

        def write(store):
            pipe = store.pipeline()
            pipe.hincrby(bucket, kind, 1)
            pipe.expire(bucket, (RECENT_MINUTES + 1) * 60)
            pipe.hset(info, mapping={"last_error": f"{kind}: {message}"[:500], "last_error_at": repr(now)})
            pipe.expire(info, RECORD_TTL_SECONDS)
            pipe.sadd(self._key("models"), model)
            pipe.execute()

        self._run(write)

    def status(self, models: Iterable[str] = ()) -> list[ModelStatus]:
        """A snapshot per model: ``models`` first, then any other model this deployment has called."""
        now = self._clock()
        minute = int(now // 60)
        wanted = list(dict.fromkeys(models))

        def read(store):
            known = sorted(store.smembers(self._key("models")) - set(wanted))
            pipe = store.pipeline()
            for model in wanted + known:
                pipe.hgetall(self._key("breaker", model))
                pipe.hgetall(self._key("info", model))
                pipe.lrange(self._key("latency", model), 0, -1)
                for m in range(minute - RECENT_MINUTES + 1, minute + 1):
                    pipe.hgetall(self._key("errors", model, str(m)))
            return wanted + known, pipe.execute()

        shared = self._redis_usable()
        names, replies = self._run(read)
        shared = shared and self._redis_usable()
        per_model = 3 + RECENT_MINUTES
        return [
            _status(name, replies[i * per_model : (i + 1) * per_model], now=now, shared=shared)
            for i, name in enumerate(names)
        ]

    # --- storage ------------------------------------------------------------
    def _key(self, *parts: str) -> str:
        return ":".join((self._prefix, *parts))

    def _redis_usable(self) -> bool:
        return self._redis_client is not None and time.monotonic() >= self._redis_down_until

    def _run(self, operation):
        if self._redis_usable():
            try:
                return operation(self._redis_client())
            except redis.RedisError as exc:
                # A breaker that fails the call it guards would be worse than none.
                log.warning(
                    "LLM breaker state kept in this process for %.0f s (Redis unreachable): %s",
                    REDIS_RETRY_SECONDS,
                    exc,
                )
                self._redis_down_until = time.monotonic() + REDIS_RETRY_SECONDS
        return operation(self._local)


def _status(model: str, replies: list, *, now: float, shared: bool) -> ModelStatus:
    record, info, latencies, *buckets = replies
    opened_until = _float(record.get("opened_until"))
    if opened_until is None:
        state = BreakerState.CLOSED
    else:
        state = BreakerState.OPEN if now < opened_until else BreakerState.HALF_OPEN
    errors: dict[str, int] = {}
    for bucket in buckets:
        for kind, count in bucket.items():
            errors[kind] = errors.get(kind, 0) + int(count)
    samples = sorted(float(value) for value in latencies)
    return ModelStatus(
        model=model,
        state=state,
        opened_until=opened_until,
        reason=record.get("reason", ""),
        errors=errors,
        last_error=info.get("last_error", ""),
        last_error_at=_float(info.get("last_error_at")),
        latency_samples=len(samples),
        latency_p50_ms=_percentile(samples, 0.50),
        latency_p95_ms=_percentile(samples, 0.95),
        latency_mean_ms=round(sum(samples) / len(samples), 1) if samples else None,
        shared=shared,
    )


def _percentile(ordered: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile: an observed latency, never an interpolated one."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def _float(value: str | None) -> float | None:
    return None if value is None else float(value)


class _MemoryStore:
    """The few Redis commands the breaker uses, for one process while Redis is away."""

    def __init__(self) -> None:
        self._data: dict[str, object] = {}
        self._expires: dict[str, float] = {}
        self._lock = threading.Lock()

    def _get(self, key: str, default):
        if key in self._expires and time.monotonic() >= self._expires[key]:
            self._data.pop(key, None)
            self._expires.pop(key, None)
        return self._data.get(key, default)

    def hgetall(self, key: str) -> dict:
        with self._lock:
            return dict(self._get(key, {}))

    def hset(self, key: str, mapping: dict) -> None:
        with self._lock:
            self._data[key] = {**self._get(key, {}), **{k: str(v) for k, v in mapping.items()}}

    def hincrby(self, key: str, field: str, amount: int) -> None:
        with self._lock:
            record = self._get(key, {})
            self._data[key] = {**record, field: str(int(record.get(field, 0)) + amount)}

    def set(self, key: str, value: str, *, nx: bool = False, px: int | None = None) -> bool:
        with self._lock:
            if nx and self._get(key, None) is not None:
                return False
            self._data[key] = value
            if px is not None:
                self._expires[key] = time.monotonic() + px / 1000
            return True

    def expire(self, key: str, seconds: int) -> None:
        with self._lock:
            if key in self._data:
                self._expires[key] = time.monotonic() + seconds

    def delete(self, *keys: str) -> None:
        with self._lock:
            for key in keys:
                self._data.pop(key, None)
                self._expires.pop(key, None)

    def lpush(self, key: str, value: str) -> None:
        with self._lock:
            self._data[key] = [value, *self._get(key, [])]

    def ltrim(self, key: str, start: int, end: int) -> None:
        with self._lock:
            self._data[key] = self._get(key, [])[start : end + 1]

    def lrange(self, key: str, start: int, end: int) -> list:
        with self._lock:
            values = self._get(key, [])
            return list(values[start:] if end == -1 else values[start : end + 1])

    def sadd(self, key: str, member: str) -> None:
        with self._lock:
            self._data[key] = self._get(key, set()) | {member}

    def smembers(self, key: str) -> builtins.set[str]:  # the class's own set() is in scope here
        with self._lock:
            return set(self._get(key, set()))

    def pipeline(self) -> "_MemoryPipeline":
        return _MemoryPipeline(self)


class _MemoryPipeline:
    """Runs each command at once and returns the replies on ``execute``, like a Redis pipeline."""

    def __init__(self, store: _MemoryStore) -> None:
        self._store = store
        self._replies: list = []

    def __getattr__(self, name: str):
        command = getattr(self._store, name)

        def queue(*args, **kwargs):
            self._replies.append(command(*args, **kwargs))
            return self

        return queue

    def execute(self) -> list:
        replies, self._replies = self._replies, []
        return replies
