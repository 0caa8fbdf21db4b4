"""Back up a database into a directory (dump + manifest), restore one, keep the newest few.

A backup is written under a temporary name and renamed when whole, so a
half-written one never looks like a backup. It is readable by its owner
alone (directories 0700, files 0600, whatever the umask): the dump holds
every key's hash, every account's password hash and every source. Sessions
are left out of it, so a copy of a backup signs nobody in. A restore runs in
one transaction (pg_restore's script relayed into psql, committed only when
it was read whole): the old contents are dropped and the dump loaded
together, so a restore that fails leaves the database as it was.
"""

import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from rag_site.backup.errors import BackupError
from rag_site.backup.files import PRIVATE_DIR, documents_check, tree_copy, tree_private
from rag_site.backup.manifest import (
    DUMP_NAME,
    Manifest,
    applied_migrations,
    embedding_models,
    file_sha256,
    product_version,
    table_counts,
)
from rag_site.backup.pgtools import Database, tool_path

log = logging.getLogger(__name__)

SCHEDULED_PREFIX = "rag-site-"
DOCUMENTS_NAME = "documents"
# A restore drops the schema: with the web or a worker still connected it would wait behind their locks
# forever; after this long it gives up and says why instead.
LOCK_TIMEOUT = "10s"
# django.contrib.sessions' table: a session key is as good as its owner's password until it expires. Its rows are
# left out of every dump (the table itself is kept, empty), and emptied by a restore, for backups made before.
SESSIONS_TABLE = "django_session"


def backup_create(
    *, target: Path, database: Database, bin_dir: str = "", documents_dir: Path | None = None
) -> Manifest:
    """Dump ``database`` into the new directory ``target`` (pg_dump -Fc, manifest.json, uploaded documents)."""
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise BackupError(f"{target} already exists and is not an empty directory: choose a new path")
    pg_dump = tool_path("pg_dump", bin_dir=bin_dir)
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        partial.chmod(PRIVATE_DIR)  # first: nothing written inside is reachable by others, whatever its own mode
        manifest = _dump(partial, database=database, pg_dump=pg_dump)
        if documents_dir and documents_dir.is_dir() and any(documents_dir.iterdir()):
            manifest.documents = tree_copy(documents_dir, partial / DOCUMENTS_NAME)
        manifest.write(partial)
        tree_private(partial)
        if target.exists():
            target.rmdir()
        partial.rename(target)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return manifest


def _dump(directory: Path, *, database: Database, pg_dump: str) -> Manifest:
    # The manifest is read in the snapshot pg_dump dumps (exported from this transaction), so its counts and
    # migrations describe exactly the dump even while people keep writing.
    with _connect(database) as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        with conn.transaction(), conn.cursor() as cursor:
            row = cursor.execute("SELECT pg_export_snapshot(), current_setting('server_version')").fetchone()
            assert row is not None
            snapshot, server_version = row
            manifest = Manifest(
                version=product_version(),
                created_at=datetime.now(UTC).isoformat(timespec="seconds"),
                server_version=server_version,
                migrations=applied_migrations(cursor),
                embedding_models=embedding_models(cursor),
                counts=table_counts(cursor),
            )
            dump = directory / DUMP_NAME
            _run(
                [
                    pg_dump,
                    "--format=custom",
                    f"--snapshot={snapshot}",
                    f"--exclude-table-data={SESSIONS_TABLE}",
                    f"--file={dump}",
                ],
                database=database,
            )
    manifest.dump_sha256 = file_sha256(dump)
    manifest.dump_bytes = dump.stat().st_size
    return manifest


@dataclass(frozen=True)
class RestoreReport:
    manifest: Manifest
    counts: dict[str, int]
    # Migrations this code has that the backup predates: `manage.py migrate` applies them.
    pending: list[str]


def backup_restore(
    *,
    source: Path,
    database: Database,
    known_migrations: dict[str, set[str]],
    force: bool = False,
    bin_dir: str = "",
    documents_dir: Path | None = None,
    lock_timeout: str = LOCK_TIMEOUT,
) -> RestoreReport:
    """Replace ``database``'s contents with the backup in ``source``, after checking it; nothing changes on refusal."""
    manifest = backup_verify(source=source, known_migrations=known_migrations)
    pg_restore, psql = tool_path("pg_restore", bin_dir=bin_dir), tool_path("psql", bin_dir=bin_dir)
    with _connect(database) as conn, conn.cursor() as cursor:
        held = {label: n for label, n in table_counts(cursor).items() if n}
    if held and not force:
        rows = ", ".join(f"{n} {label}" for label, n in held.items())
        raise BackupError(
            f"database {database.name!r} holds data ({rows}); nothing was restored. "
            "rag_restore --force replaces its contents with the backup's."
        )
    _load(source / DUMP_NAME, database=database, pg_restore=pg_restore, psql=psql, lock_timeout=lock_timeout)
    with _connect(database) as conn, conn.cursor() as cursor:
        counts = table_counts(cursor)
    if counts != manifest.counts:
        raise BackupError(
            f"the backup was restored, but its counts {counts} differ from the manifest's {manifest.counts}"
        )
    if documents_dir and (source / DOCUMENTS_NAME).is_dir():
        tree_copy(source / DOCUMENTS_NAME, documents_dir)
    applied = {(app, name) for app, names in manifest.migrations.items() for name in names}
    pending = sorted(
        f"{app}.{name}" for app, names in known_migrations.items() for name in names if (app, name) not in applied
    )
    return RestoreReport(manifest=manifest, counts=counts, pending=pending)


def embedding_exports_ready(models: list[dict]) -> list[str]:
    """Export the ONNX files of the restored database's local embedding models (the manifest's list) now, while the
    web is stopped: otherwise the first searches after a restore on a machine without them waited for the export
    (66 and 128 s measured). What was done, one line each; a model that cannot be exported is said, not raised:
    the restore itself succeeded, and the first search reports the same error."""
    from sources.embedding import EmbeddingError
    from sources.embedding.local import onnx_export_ready

    done = []
    for model in models:
        if model["provider"] != "local":
            continue  # an API model has nothing on this machine
        try:
            exported = onnx_export_ready(model["name"])
        except EmbeddingError as exc:
            done.append(f"embedding model {model['name']}: not exported ({exc}); the first search will try again")
            continue
        if exported is not None:
            done.append(f"embedding model {model['name']}: ONNX export ready ({exported.parent})")
    return done


def backup_verify(*, source: Path, known_migrations: dict[str, set[str]]) -> Manifest:
    """The backup's manifest, once its dump matches the checksum and this code knows every migration it has."""
    manifest = Manifest.read(source)
    dump = source / DUMP_NAME
    if not dump.is_file():
        raise BackupError(f"{source} has a manifest but no {DUMP_NAME}")
    documents_check(source / DOCUMENTS_NAME)
    if file_sha256(dump) != manifest.dump_sha256:
        raise BackupError(
            f"{dump} does not match the checksum in its manifest: the file is damaged or was changed; nothing was "
            "restored"
        )
    unknown = sorted(
        f"{app}.{name}"
        for app, names in manifest.migrations.items()
        for name in names
        if name not in known_migrations.get(app, set())
    )
    if unknown:
        raise BackupError(
            f"the backup comes from a newer rag-site ({manifest.version}): its migrations {', '.join(unknown)} are "
            "unknown to this one. Upgrade rag-site, then restore; nothing was restored"
        )
    return manifest


def _load(dump: Path, *, database: Database, pg_restore: str, psql: str, lock_timeout: str) -> None:
    """Empty the schema and load the dump in one transaction, committed only once pg_restore has read it all.

    Relayed through this process rather than piped straight (or `psql --single-transaction`, which commits at the
    end of its input): a pg_restore that dies half-way would hand psql a short script, and psql would commit the
    dropped schema with half the data. Here psql sees its input end without COMMIT and rolls back.
    """
    # --no-owner/--no-privileges: a backup of the embedded server (role postgres) restores into compose's (role
    # rag) and back.
    with tempfile.TemporaryFile() as restore_log, tempfile.TemporaryFile() as load_log:
        restore = subprocess.Popen(
            [pg_restore, "--no-owner", "--no-privileges", "--file=-", str(dump)],
            stdout=subprocess.PIPE,
            stderr=restore_log,
            env=_env(database),
        )
        load = subprocess.Popen(
            [psql, "--no-psqlrc", "--quiet", "--set=ON_ERROR_STOP=1", "--file=-"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=load_log,
            env=_env(database),
        )
        assert restore.stdout is not None and load.stdin is not None
        prelude = (
            "".join((f"SET lock_timeout = '{lock_timeout}';\n", "BEGIN;\n", "DROP SCHEMA IF EXISTS public CASCADE;\n"))
            + "CREATE SCHEMA public;\n"
        )
        psql_stopped = False
        try:
            load.stdin.write(prelude.encode())
            while block := restore.stdout.read(1 << 20):
                load.stdin.write(block)
            if restore.wait() == 0:
                # A backup made before sessions were left out still carries them: nobody is signed in by one.
                load.stdin.write(
                    f"DO $$ BEGIN IF to_regclass('public.{SESSIONS_TABLE}') IS NOT NULL THEN "
                    f"TRUNCATE public.{SESSIONS_TABLE}; END IF; END $$;\nCOMMIT;\n".encode()
                )
            load.stdin.close()
        except BrokenPipeError:
            psql_stopped = True  # at an error: its log says which
        finally:
            restore.stdout.close()
            restore.wait()
            load.wait()
        load_log.seek(0)
        load_errors = load_log.read().decode(errors="replace").strip()
        restore_log.seek(0)
        restore_errors = restore_log.read().decode(errors="replace").strip()
    if "lock timeout" in load_errors:
        raise BackupError(
            "the database is in use (another process holds its tables): stop the web and worker processes, "
            "then restore again; nothing was restored"
        )
    # When psql stopped first, pg_restore only saw its pipe close: psql's error is the cause.
    if restore.returncode and not psql_stopped:
        raise BackupError(f"pg_restore could not read the dump; nothing was restored: {restore_errors[-2000:]}")
    if load.returncode:
        raise BackupError(f"loading the dump failed; nothing was restored: {load_errors[-2000:]}")


def backups_prune(*, directory: Path, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` scheduled backups in ``directory``; returns those deleted."""
    backups = sorted(p for p in directory.glob(f"{SCHEDULED_PREFIX}*") if (p / "manifest.json").is_file())
    doomed = backups[:-keep] if keep else backups
    for path in doomed:
        shutil.rmtree(path)
    return doomed


def backup_scheduled(
    *, directory: Path, keep: int, database: Database, bin_dir: str = "", documents_dir: Path | None = None
) -> Path:
    """One scheduled backup, named by its UTC time so names sort by age; then the oldest beyond ``keep`` go."""
    directory.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    target = directory / f"{SCHEDULED_PREFIX}{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    backup_create(target=target, database=database, bin_dir=bin_dir, documents_dir=documents_dir)
    backups_prune(directory=directory, keep=keep)
    return target


def _connect(database: Database) -> psycopg.Connection:
    try:
        return psycopg.connect(database.conninfo(), autocommit=True)
    except psycopg.OperationalError as exc:
        raise BackupError(f"cannot connect to database {database.name!r}: {exc}") from exc


def _env(database: Database) -> dict[str, str]:
    return {**os.environ, **database.env()}


def _run(command: list[str], *, database: Database) -> None:
    result = subprocess.run(command, env=_env(database), capture_output=True, text=True, check=False)
    if result.returncode:
        raise BackupError(f"{Path(command[0]).name} failed: {result.stderr.strip()[-2000:]}")
