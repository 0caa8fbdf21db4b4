"""Bulk loading of the search bench's corpus: indexes built after the rows, not beside them.

The product writes chunks through the lexical triggers and into a live HNSW
index, so that a committed chunk is searchable at once and a crash loses
nothing. The bench corpus is a bench: on this checkout's own embedded
database it is loaded the way PostgreSQL's manual advises for a bulk load
("Populating a Database"): the chunk and postings tables' secondary indexes
(and the postings' primary key) are dropped first, rows go in with COPY and
the triggers off, the postings are computed afterwards in one set-based
statement per table, and the indexes are rebuilt from sorted input, HNSW
with a large maintenance_work_mem and a parallel worker.

The dropped indexes' definitions are written to ``var/bench/dropped-indexes.json``
before anything is dropped, and ``indexes_restore`` (called before every
build) recreates whatever an interrupted build left missing.

Measured at 300k chunks before this (COPY through the triggers into live
indexes): loading 653 s of an 853 s build.
"""

import json
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import connection

from retrieval.migrations._lexical_sql import _add as lexical_rows_add  # the triggers' own INSERTs, frozen there

CHUNK_TABLE = "sources_chunk"
POSTING_TABLE = "retrieval_posting"
# The session's memory for index builds: the HNSW graph of 1M 384-dimension halfvecs takes about 1.2 GB
# (pgvector builds in memory while it fits; past that it is many times slower).
MAINTENANCE_WORK_MEM = "3GB"
# Sorting the postings (tens of millions of rows at 1M chunks) in memory.
WORK_MEM = "1GB"
# Two cores: the leader and one worker.
PARALLEL_WORKERS = 1


def dropped_file() -> Path:
    return settings.VAR_DIR / "bench" / "dropped-indexes.json"


def can_bulk_load() -> bool:
    """Whether this session may switch the triggers off (a superuser's, as on the embedded server)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        row = cursor.fetchone()
    return bool(row and row[0])


def _droppable() -> list[dict]:
    """The chunk table's indexes that back no constraint, and every index of the postings table (its primary key
    as a constraint), each with the statement that recreates it."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT t.relname, i.relname, pg_get_indexdef(i.oid), c.conname, pg_get_constraintdef(c.oid)
            FROM pg_index x
            JOIN pg_class i ON i.oid = x.indexrelid
            JOIN pg_class t ON t.oid = x.indrelid
            LEFT JOIN pg_constraint c ON c.conindid = i.oid AND c.conrelid = t.oid
            WHERE t.relname = ANY(%s) AND t.relnamespace = 'public'::regnamespace
              AND (t.relname = %s OR c.oid IS NULL)
            ORDER BY 1, 2
            """,
            [[CHUNK_TABLE, POSTING_TABLE], POSTING_TABLE],
        )
        rows = cursor.fetchall()
    found = []
    for table, index, index_def, constraint, constraint_def in rows:
        if constraint:
            drop = f'ALTER TABLE {table} DROP CONSTRAINT "{constraint}"'
            create = f'ALTER TABLE {table} ADD CONSTRAINT "{constraint}" {constraint_def}'
        else:
            drop = f'DROP INDEX "{index}"'
            create = index_def
        found.append({"table": table, "index": index, "drop": drop, "create": create})
    return found


def indexes_drop(log: Callable[[str], None] = print) -> None:
    """Drop the droppable indexes, having written down how to recreate them."""
    indexes = _droppable()
    path = dropped_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(indexes, indent=1))
    with connection.cursor() as cursor:
        for index in indexes:
            cursor.execute(index["drop"])
    log(f"dropped {len(indexes)} indexes for the load ({', '.join(i['index'] for i in indexes)})")


def indexes_restore(log: Callable[[str], None] = print) -> dict[str, float]:
    """Recreate what ``indexes_drop`` dropped (after a load, or after an interrupted one); seconds per index."""
    path = dropped_file()
    if not path.exists():
        return {}
    indexes = json.loads(path.read_text())
    existing = {i["index"] for i in _droppable()}
    seconds: dict[str, float] = {}
    with connection.cursor() as cursor:
        _build_settings(cursor)
        for index in indexes:
            if index["index"] in existing:
                continue
            started = time.perf_counter()
            cursor.execute(index["create"])
            seconds[index["index"]] = time.perf_counter() - started
            log(f"  built {index['index']} in {seconds[index['index']]:.0f} s")
        _build_settings(cursor, reset=True)
    path.unlink()
    return seconds


def _build_settings(cursor, *, reset: bool = False) -> None:
    if reset:
        cursor.execute("RESET maintenance_work_mem; RESET max_parallel_maintenance_workers; RESET work_mem")
        return
    cursor.execute(
        f"SET maintenance_work_mem = '{MAINTENANCE_WORK_MEM}'; "
        f"SET max_parallel_maintenance_workers = {PARALLEL_WORKERS}; SET work_mem = '{WORK_MEM}'"
    )


def triggers_off_sql() -> str:
    """For each COPY's transaction: the lexical triggers do not fire (``postings_add`` does their work afterwards)."""
    return "SET LOCAL session_replication_role = replica"


def postings_add(*, source_id: int) -> None:
    """The lexical index's rows for every chunk of ``source_id``: the insert trigger's statements, run once over
    the whole source instead of once per COPY."""
    rows = f"(SELECT * FROM {CHUNK_TABLE} WHERE source_id = {int(source_id)})"
    with connection.cursor() as cursor:
        _build_settings(cursor)
        cursor.execute(lexical_rows_add(rows))
        _build_settings(cursor, reset=True)


def hnsw_build_settings():
    """The session settings an HNSW build runs with (context: reset afterwards)."""
    return _Settings()


class _Settings:
    def __enter__(self) -> None:
        with connection.cursor() as cursor:
            _build_settings(cursor)

    def __exit__(self, *exc) -> None:
        with connection.cursor() as cursor:
            _build_settings(cursor, reset=True)


# Tables whose size the bench reports: the chunks (with their TOAST), the lexical index's three tables.
DISK_TABLES = (CHUNK_TABLE, POSTING_TABLE, "retrieval_term", "retrieval_lexical_source")


def disk_usage() -> dict:
    """Bytes on disk of the tables that hold the corpus: each table's heap (with TOAST) and each of its indexes,
    and the database's total. Everything in these tables counts, the bench corpus and anything else there."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT t.relname, pg_table_size(t.oid), pg_indexes_size(t.oid),
                   coalesce((SELECT json_object_agg(i.relname, pg_relation_size(i.oid))
                             FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
                             WHERE x.indrelid = t.oid), '{}'::json)
            FROM pg_class t WHERE t.relname = ANY(%s) AND t.relnamespace = 'public'::regnamespace
            """,
            [list(DISK_TABLES)],
        )
        tables = {
            name: {"table_bytes": table, "indexes_bytes": indexes, "indexes": by_index}
            for name, table, indexes, by_index in cursor.fetchall()
        }
        cursor.execute(f"SELECT count(*) FROM {CHUNK_TABLE}")
        chunks = cursor.fetchone()[0]
        cursor.execute("SELECT pg_database_size(current_database())")
        database = cursor.fetchone()[0]
    hnsw = sum(size for name, size in tables.get(CHUNK_TABLE, {}).get("indexes", {}).items() if "_hnsw_" in name)
    chunk_part = tables.get(CHUNK_TABLE, {})
    lexical = sum(
        tables[name]["table_bytes"] + tables[name]["indexes_bytes"] for name in DISK_TABLES[1:] if name in tables
    )
    per = max(chunks, 1)
    return {
        "chunks_in_table": chunks,
        "database_bytes": database,
        "tables": tables,
        "per_chunk_bytes": {
            "chunk_table": round(chunk_part.get("table_bytes", 0) / per),
            "chunk_indexes_without_hnsw": round((chunk_part.get("indexes_bytes", 0) - hnsw) / per),
            "hnsw": round(hnsw / per),
            "lexical_postings": round(lexical / per),
            "database": round(database / per),
        },
    }
