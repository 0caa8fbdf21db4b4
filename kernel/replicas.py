"""Read replicas (DATABASE_REPLICA_URLS): which database a read-only request reads, and which replicas may be read.

A request that only reads (a search, the page, /context, /mcp, a GET of the
API) runs inside ``replica_reads()``: it picks one replica that answered
its last check and is not lagging, and for the rest of the request the
corpus (the rows of the apps the router is given, minus the models that must
read their own writes) is read there, by the ORM through ``ReplicaRouter``
and by raw SQL through ``read_connection()``. Everything else, and every
write, uses the primary: sessions, users and API keys (a key just created
must work, its last-used time is written), jobs right after they are queued,
memories just written. With no replica healthy, the primary serves.

A replica's state is checked at most every ``RECHECK_SECONDS`` per process
(one small query), not per request. A replica that drops a request's
connection is marked down at once and the request runs again on the primary
(surfaces.middleware.RetryLostConnection calls ``replica_lost``).
"""

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from kernel.errors import connection_lost

log = logging.getLogger(__name__)

PRIMARY = "default"
# Long enough that the check costs nothing beside searches (one 0.2 ms query per replica, per process, per
# period), short enough that a replica that came back, or caught up, is read again within seconds.
RECHECK_SECONDS = 5.0

# Lag in seconds: 0 when the replica has replayed everything it received, else the age of the last transaction
# it replayed (the primary's clock); NULL when it is no replica (promoted, or the URL names the primary).
_CHECK_SQL = """
SELECT pg_is_in_recovery(),
       CASE WHEN NOT pg_is_in_recovery() THEN NULL
            WHEN pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn() THEN 0
            ELSE COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - pg_last_xact_replay_timestamp()), 0)
       END::float8
"""


@dataclass(frozen=True, slots=True)
class ReplicaState:
    alias: str
    readable: bool
    reason: str  # why not readable; "" when it is
    lag_seconds: float | None
    checked_at: float


class ReplicaPool:
    """The replicas of one process: their last checked state and the choice of one for a request."""

    def __init__(
        self,
        aliases: tuple[str, ...],
        *,
        max_lag_seconds: float,
        recheck_seconds: float = RECHECK_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.aliases = aliases
        self.max_lag_seconds = max_lag_seconds
        self.recheck_seconds = recheck_seconds
        self.clock = clock
        self._states: dict[str, ReplicaState] = {}
        self._lock = threading.Lock()
        self._turn = itertools.count()

    def choose(self) -> str:
        """A readable replica (in turn, to spread the load), else the primary."""
        readable = [alias for alias in self.aliases if self.state(alias).readable]
        if not readable:
            return PRIMARY
        return readable[next(self._turn) % len(readable)]

    def state(self, alias: str, *, fresh: bool = False) -> ReplicaState:
        now = self.clock()
        with self._lock:
            known = self._states.get(alias)
            if not fresh and known is not None and now - known.checked_at < self.recheck_seconds:
                return known
        state = self._check(alias, now)
        with self._lock:
            previous = self._states.get(alias)
            self._states[alias] = state
        if previous is None or previous.readable != state.readable:
            if state.readable:
                log.info("replica %s is read (lag %.1f s)", alias, state.lag_seconds or 0.0)
            else:
                log.warning("replica %s is skipped, searches read the primary: %s", alias, state.reason)
        return state

    def states(self, *, fresh: bool = False) -> list[ReplicaState]:
        return [self.state(alias, fresh=fresh) for alias in self.aliases]

    def _check(self, alias: str, now: float) -> ReplicaState:
        from django.db import DatabaseError, connections

        conn = connections[alias]
        if conn.connection is not None and not conn.is_usable():
            conn.close()  # a connection the replica dropped says only "closed"; a new one says why
        try:
            with conn.cursor() as cursor:
                cursor.execute(_CHECK_SQL)
                in_recovery, lag = cursor.fetchone()
        except DatabaseError as exc:
            # Closed, so this thread's next use of the replica connects afresh rather than failing on it again.
            conn.close()
            reason = next(iter(str(exc).strip().splitlines()), type(exc).__name__)
            return ReplicaState(alias, False, f"unreachable: {reason}", None, now)
        if not in_recovery:
            return ReplicaState(alias, False, "not a replica (not in recovery): it may have been promoted", None, now)
        if lag > self.max_lag_seconds:
            return ReplicaState(
                alias, False, f"lags {lag:.1f} s behind the primary (limit {self.max_lag_seconds:g} s)", lag, now
            )
        return ReplicaState(alias, True, "", lag, now)


class _Reading:
    """The database the current request reads its corpus from; changed when that replica is lost."""

    def __init__(self, alias: str) -> None:
        self.alias = alias


_READING: ContextVar[_Reading | None] = ContextVar("replica_reading", default=None)


class ReplicaRouter:
    """Django database router: inside ``replica_reads()``, the corpus's reads go to the chosen replica.

    ``apps``: the app labels whose models are read there; ``primary_models``: models of those apps that must read
    their own writes ("app.Model"). Writes and migrations always use the primary.
    """

    def __init__(
        self,
        *,
        aliases: tuple[str, ...],
        max_lag_seconds: float,
        apps: tuple[str, ...],
        primary_models: tuple[str, ...] = (),
    ) -> None:
        self.pool = ReplicaPool(aliases, max_lag_seconds=max_lag_seconds)
        self.apps = frozenset(apps)
        self.primary_models = frozenset(primary_models)

    def db_for_read(self, model, **hints) -> str | None:
        reading = _READING.get()
        if reading is None or reading.alias == PRIMARY:
            return None
        meta = model._meta
        if meta.app_label not in self.apps or meta.label in self.primary_models:
            return None
        return reading.alias

    def db_for_write(self, model, **hints) -> str | None:
        return PRIMARY

    def allow_relation(self, obj1, obj2, **hints) -> bool | None:
        # The replicas hold the primary's rows: an object read from one may relate to one read from the other.
        return True

    def allow_migrate(self, db: str, app_label: str, model_name: str | None = None, **hints) -> bool | None:
        return db == PRIMARY


def replica_pool() -> ReplicaPool | None:
    """The pool of the configured ReplicaRouter; None when no replica is configured."""
    from django.db import router

    for candidate in router.routers:
        if isinstance(candidate, ReplicaRouter) and candidate.pool.aliases:
            return candidate.pool
    return None


@contextmanager
def replica_reads() -> Iterator[None]:
    """Read the corpus from a replica for the block (nested: the outer block's choice stands)."""
    pool = replica_pool()
    if pool is None or _READING.get() is not None:
        yield
        return
    token = _READING.set(_Reading(pool.choose()))
    try:
        yield
    except Exception as exc:
        # Before the choice is forgotten: a request run again must not pick the same dead replica.
        if connection_lost(exc):
            replica_lost()
        raise
    finally:
        _READING.reset(token)


@contextmanager
def primary_reads() -> Iterator[None]:
    """Read everything from the primary for the block, even inside ``replica_reads()`` (a memory just written)."""
    token = _READING.set(_Reading(PRIMARY))
    try:
        yield
    finally:
        _READING.reset(token)


def read_alias() -> str:
    """The database alias the corpus is read from now (raw SQL takes ``connections[read_alias()]``)."""
    reading = _READING.get()
    return PRIMARY if reading is None else reading.alias


def read_connection():
    """The connection raw corpus reads use now: the chosen replica's inside ``replica_reads()``, else the primary's."""
    from django.db import connections

    return connections[read_alias()]


def replica_lost() -> bool:
    """After a lost connection: if the current request was reading a replica that no longer answers, check it now
    (it is then skipped until it answers again) and let the rest of the request, or its second run, read another
    replica or the primary. Whether it was that.
    """
    reading = _READING.get()
    pool = replica_pool()
    if reading is None or pool is None or reading.alias == PRIMARY:
        return False
    if pool.state(reading.alias, fresh=True).readable:
        return False  # the replica answers: the primary's connection was the one lost
    reading.alias = pool.choose()
    return True
