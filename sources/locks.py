"""Session advisory locks on workspace roots and vector batches: one worker on each, and the proof that it is alive.

The database session that runs a root's job holds ``pg_advisory_lock(ROOT_LOCKS,
root_id)`` for the whole run. PostgreSQL releases a session lock when the
session ends, however its process died (SIGKILL, out of memory, a crash), so
"no session holds the lock" means "nobody runs that root", at once, without
waiting for a heartbeat to go stale.
"""

import logging

from django.db import DatabaseError, connection

log = logging.getLogger(__name__)

ROOT_LOCKS = 4242  # advisory-lock namespace (first key) for roots
BATCH_LOCKS = 4243  # and for vector batches (sources/pipeline/vectors.py): who embeds one holds its lock

# Two-key advisory locks appear in pg_locks with the keys in classid and
# objid and objsubid = 2; the database column keeps other databases' apart.
_HOLDER_SQL = """
    SELECT pid FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND objsubid = 2
      AND classid::bigint = %s AND objid::bigint = %s
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
    LIMIT 1
"""


def root_lock_try(root_id: int) -> bool:
    """Take the root's lock for this session; False when another session holds it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [ROOT_LOCKS, root_id])
        return bool(cursor.fetchone()[0])


def root_lock_release(root_id: int) -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [ROOT_LOCKS, root_id])
    except DatabaseError as exc:
        # A broken connection has ended its session, and the lock with it.
        log.warning("could not release the lock of root %s (its session is gone): %s", root_id, exc)


def root_lock_holder(root_id: int) -> int | None:
    """The backend pid of the session holding the root's lock, or None."""
    return _holder(ROOT_LOCKS, root_id)


def batch_lock_try(batch_id: int) -> bool:
    """Take the vector batch's lock for this session; False when another session holds it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [BATCH_LOCKS, _key(batch_id)])
        return bool(cursor.fetchone()[0])


def batch_lock_release(batch_id: int) -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [BATCH_LOCKS, _key(batch_id)])
    except DatabaseError as exc:
        log.warning("could not release the lock of vector batch %s (its session is gone): %s", batch_id, exc)


def batch_lock_holder(batch_id: int) -> int | None:
    """The backend pid of the session holding the vector batch's lock, or None."""
    return _holder(BATCH_LOCKS, _key(batch_id))


def _key(batch_id: int) -> int:
    # The two-key form takes 32-bit keys; ids past 2**31 wrap (two batches then share a lock: a wait, never a mix).
    return batch_id % 2**31


def _holder(namespace: int, key: int) -> int | None:
    with connection.cursor() as cursor:
        cursor.execute(_HOLDER_SQL, [namespace, key])
        row = cursor.fetchone()
    return row[0] if row else None


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def backend_terminate(pid: int, *, wait_ms: int = 5000) -> bool:
    """End another session (its locks are released); waits until it is gone, up to ``wait_ms``."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s, %s)", [pid, wait_ms])
        return bool(cursor.fetchone()[0])
