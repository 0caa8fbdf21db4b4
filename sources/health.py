"""Health of the parts a search or an index job needs: database, broker, workers, beat, embedding model, language model.

Cheap enough for a load balancer to call every few seconds: one
``SELECT 1``, one Redis PING, a few key reads. The embedding model is
reported, never loaded; the language model (when one is configured) is
judged by its circuit breaker, never called.
"""

import time
from dataclasses import dataclass, field
from typing import Any

import redis
from django.db import DatabaseError, connection

from kernel import heartbeats
from kernel.breaker import BreakerState
from kernel.config import LLMConfig, llm_config
from kernel.llm import llm_status
from kernel.replicas import ReplicaPool, replica_pool
from sources.config import EmbeddingConfig, embedding_config
from sources.embedding.local import model_findable
from sources.embedding.registry import embedder_loaded, model_reference
from sources.models import EmbeddingModel


@dataclass(slots=True)
class Check:
    ok: bool
    details: dict[str, Any] = field(default_factory=dict)  # for callers with Right.VIEW_HEALTH_DETAILS only


@dataclass(slots=True)
class Health:
    checks: dict[str, Check]

    @property
    def critical_ok(self) -> bool:
        """Without the database or the broker nothing is searched or queued: the answer is 503."""
        return self.checks["database"].ok and self.checks["broker"].ok

    @property
    def status(self) -> str:
        return "ok" if all(check.ok for check in self.checks.values()) else "degraded"


def health_check(*, embedding: EmbeddingConfig | None = None, llm: LLMConfig | None = None) -> Health:
    """``embedding``, ``llm``: built by the caller (the API), else from the settings now."""
    embedding, llm = embedding or embedding_config(), llm or llm_config()
    database = _database()
    broker = _broker()
    return Health(
        {
            "database": database,
            "broker": broker,
            **_heartbeats(reachable=broker.ok),
            "embedding_model": _embedding_model(embedding.model, database_ok=database.ok),
            **({"llm": _llm(llm)} if llm.base_url else {}),
            **({"replicas": _replicas(pool)} if (pool := replica_pool()) else {}),
        }
    )


def _database() -> Check:
    started = time.perf_counter()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        return Check(False, {"error": str(exc).strip() or type(exc).__name__})
    return Check(True, {"latency_ms": round((time.perf_counter() - started) * 1000, 1)})


def _broker() -> Check:
    started = time.perf_counter()
    if error := heartbeats.broker_ping():
        return Check(False, {"error": error})
    return Check(True, {"latency_ms": round((time.perf_counter() - started) * 1000, 1)})


def _heartbeats(*, reachable: bool) -> dict[str, Check]:
    if not reachable:
        unknown = {"error": "unknown: the broker, which holds the heartbeats, is unreachable"}
        return {"worker": Check(False, unknown), "beat": Check(False, unknown)}
    try:
        ages = heartbeats.heartbeat_ages()  # every record in one scan
        workers = {name: age for name, age in ages.items() if name.startswith(heartbeats.WORKER)}
        beat, sweep = ages.get(heartbeats.BEAT), ages.get(heartbeats.SWEEP)
    except redis.RedisError as exc:
        unknown = {"error": f"heartbeats unreadable: {exc}"}
        return {"worker": Check(False, unknown), "beat": Check(False, unknown)}
    alive = {name.removeprefix(heartbeats.WORKER): age for name, age in workers.items()}
    worker = Check(bool(alive), {"workers": alive, "age_seconds": min(alive.values(), default=None)})
    if not alive:
        worker.details["error"] = f"no worker has reported in the last {heartbeats.WORKER_STALE:.0f} s"
    beat_ok = beat is not None and beat <= heartbeats.BEAT_STALE
    beat_check = Check(beat_ok, {"age_seconds": beat, "recovery_sweep_age_seconds": sweep})
    if not beat_ok:
        beat_check.details["error"] = (
            "beat has not published a task in the last 24 h"
            if beat is None
            else f"beat last published a task {beat:.0f} s ago"
        )
    return {"worker": worker, "beat": beat_check}


def _embedding_model(name: str, *, database_ok: bool) -> Check:
    provider, model_name = model_reference(name)
    loaded = embedder_loaded(provider=provider, name=model_name)
    if provider == "api":
        # Served by the language model's endpoint: its breaker (the "llm" check) tells whether it answers.
        return Check(True, {"name": name, "loaded_here": loaded})
    known = False
    if database_ok:
        try:
            known = EmbeddingModel.objects.filter(provider="local", name=name).exists()  # a worker has loaded it
        except DatabaseError:
            pass
    ok = loaded or known or model_findable(name)
    details: dict[str, Any] = {"name": name, "loaded_here": loaded}
    if not ok:
        details["error"] = f"{name!r} is neither the bundled model nor an existing path, and no worker has loaded it"
    return Check(ok, details)


def _replicas(pool: ReplicaPool) -> Check:
    """Not critical: a skipped replica's searches read the primary. The states searches go by (checked every few
    seconds per process), so the answer costs nothing more."""
    states = pool.states()
    details: dict[str, Any] = {
        "replicas": {
            state.alias: {"readable": state.readable, "lag_seconds": state.lag_seconds, "reason": state.reason}
            for state in states
        }
    }
    skipped = [state for state in states if not state.readable]
    if skipped:
        details["error"] = "searches read the primary instead of " + "; ".join(
            f"{state.alias} ({state.reason})" for state in skipped
        )
    return Check(not skipped, details)


def _llm(config: LLMConfig) -> Check:
    """Ok unless every model of the chain is open (skipped by every process); details: each one's breaker and health."""
    statuses = llm_status(config)
    chain = set(config.chain)
    # Without a chat chain (embeddings only) every model called lately counts.
    judged = [status for status in statuses if status.model in chain] or statuses
    open_ = [status for status in judged if status.state == BreakerState.OPEN]
    ok = not judged or len(open_) < len(judged)
    details: dict[str, Any] = {"models": [status.as_dict() for status in statuses]}
    if not ok:
        details["error"] = "every model is cooling down after failures: " + "; ".join(
            f"{status.model} ({status.reason})" if status.reason else status.model for status in open_
        )
    return Check(ok, details)
