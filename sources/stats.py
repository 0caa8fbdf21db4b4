"""The whole index in numbers, for operators (`manage.py rag_stats`): no scope, every source counts.

A fixed number of queries whatever the corpus size: counts are grouped in
the database, sizes come from PostgreSQL's catalog, and the latest job of
every root is one DISTINCT ON.
"""

from collections.abc import Mapping
from typing import Any

from django.db import connection
from django.db.models import Count, F, Q

from kernel.heartbeats import queue_lengths
from sources.jobs import job_state, jobs_ahead
from sources.models import (
    Chunk,
    EmbeddingModel,
    IndexedFile,
    IndexJob,
    IndexStatus,
    JobStatus,
    Skill,
    Source,
    Tool,
    UploadedDocument,
    WorkspaceRoot,
)
from sources.queues import INTERACTIVE, QUEUES, job_queue

# The tables of this project's apps: Django's own (sessions, admin log) and beat's are not the index.
_APP_TABLES = ("sources_%", "access_%")


def stats_collect() -> dict[str, Any]:
    """Sources by kind, files, chunks, models, disk, the latest job of each root and each queue's depth."""
    return {
        "sources": _sources(),
        "files": IndexedFile.objects.count(),
        "chunks": Chunk.objects.filter(generation=F("source__active_generation")).count(),
        "models": _models(),
        "disk": _disk(),
        "roots": _roots(),
        "queues": _queues(),
    }


def _sources() -> list[dict[str, Any]]:
    counts: dict[str, Mapping[str, Any]] = {
        row["kind"]: row
        for row in Source.objects.values("kind").annotate(
            sources=Count("pk"), enabled=Count("pk", filter=Q(enabled=True))
        )
    }
    chunks = dict(
        Chunk.objects.filter(generation=F("source__active_generation"))
        .values_list("source__kind")
        .annotate(n=Count("pk"))
    )
    return [
        {
            "kind": kind,
            "sources": counts.get(kind, {}).get("sources", 0),
            "enabled": counts.get(kind, {}).get("enabled", 0),
            "chunks": chunks.get(kind, 0),
        }
        for kind in Source.Kind.values
        if kind in counts or kind != Source.Kind.DATASET  # evaluation datasets only once there are some
    ]


def _models() -> list[dict[str, Any]]:
    rows = EmbeddingModel.objects.annotate(vectors=Count("chunks")).order_by("-vectors", "pk")
    return [{"provider": m.provider, "name": m.name, "dimensions": m.dimensions, "vectors": m.vectors} for m in rows]


def _disk() -> dict[str, Any]:
    """Bytes per table of the project's apps (heap and TOAST, then its indexes: HNSW and BM25 live there)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname, pg_table_size(c.oid), pg_indexes_size(c.oid)
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE c.relkind IN ('r', 'p') AND n.nspname = current_schema() AND c.relname LIKE ANY (%s)
            ORDER BY pg_total_relation_size(c.oid) DESC, c.relname
            """,
            [list(_APP_TABLES)],
        )
        tables = [{"table": name, "table_bytes": data, "index_bytes": index} for name, data, index in cursor.fetchall()]
        cursor.execute("SELECT pg_database_size(current_database())")
        (database,) = cursor.fetchone()
    return {
        "tables": tables,
        "table_bytes": sum(t["table_bytes"] for t in tables),
        "index_bytes": sum(t["index_bytes"] for t in tables),
        "database_bytes": database,
    }


def _roots() -> list[dict[str, Any]]:
    latest = {job.root_id: job for job in IndexJob.objects.order_by("root_id", "-created_at").distinct("root_id")}
    ahead = jobs_ahead(latest.values())
    rows = []
    for root in WorkspaceRoot.objects.order_by("name"):
        job = latest.get(root.pk)
        rows.append(
            {
                "root": root.name,
                "id": root.pk,
                "enabled": root.enabled,
                "last_job": None
                if job is None
                else {
                    "id": job.pk,
                    "status": job.status,
                    "state": job_state(job, ahead.get(job.pk)),
                    "when": job.finished_at or job.started_at or job.created_at,
                    "message": job.message,
                },
            }
        )
    return rows


def _queues() -> dict[str, dict[str, Any]]:
    """Per queue: jobs and items (skills, tools, documents) waiting, from the rows; the broker's list length if it
    answers (a task a worker has taken is no longer in the list)."""
    depth: dict[str, dict[str, Any]] = {queue: {"jobs_queued": 0, "items_queued": 0} for queue in QUEUES}
    for job in IndexJob.objects.filter(status=JobStatus.QUEUED):
        depth[job_queue(job)]["jobs_queued"] += 1
    # Items are interactive work (a re-verify of everything sends its items to bulk, but they look the same here).
    depth[INTERACTIVE]["items_queued"] = sum(
        model.objects.filter(index_status=IndexStatus.QUEUED).count() for model in (Skill, Tool, UploadedDocument)
    )
    lengths = queue_lengths(QUEUES)
    for queue in QUEUES:
        depth[queue]["broker"] = None if lengths is None else lengths[queue]
    return depth
