"""Read queries behind the sources API and the MCP tools: what a caller may see, loaded in one query each."""

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import pathspec
from django.core.paginator import Paginator
from django.db.models import Count, F, Max, Q, QuerySet, Sum

from access.identity import Identity, scope_for
from access.scope import Scope
from kernel.breaker import RECENT_MINUTES
from kernel.config import llm_config
from kernel.errors import NotFound
from kernel.heartbeats import queue_lengths
from sources.config import embedding_config
from sources.embedding.backends import AUTO
from sources.embedding.choice import choices_listed
from sources.health import Health, health_check
from sources.job_report import job_progress_read
from sources.jobs import jobs_ahead
from sources.models import (
    ACTIVE_JOB_STATUSES,
    COMMIT_KEY,
    Chunk,
    EmbeddingModel,
    IndexedFile,
    IndexJob,
    IndexStatus,
    JobStatus,
    Skill,
    Source,
    Tool,
    WorkspaceRoot,
)
from sources.queues import QUEUES
from sources.roots import root_sources
from surfaces.schemas import SkillDetailOut


def skills_visible(identity: Identity) -> QuerySet[Skill]:
    """The skills ``identity`` may see (the same scope rule as search; disabled ones included), with chunk counts."""
    scope = scope_for(identity, kinds=[Source.Kind.SKILL])
    visible = Skill.objects.filter(source__in=scope.source_ids_sql(enabled_only=False))
    return visible.annotate(chunk_count=Count("source__chunks")).select_related("source")


def skill_readable(identity: Identity, slug: str) -> Skill:
    """One enabled skill ``identity`` may see, or NotFound.

    A skill outside the caller's scope fails with the same message as one
    that does not exist: the answer never tells them apart. A disabled skill
    is not found either, as search and context hide it; the list still shows
    it, with ``enabled: false``, so saying why hides nothing.
    """
    skill = skills_visible(identity).filter(slug=slug).first()
    if skill is None:
        raise NotFound(f"skill {slug!r} does not exist")
    if not skill.enabled:
        raise NotFound(f"skill {slug!r} is disabled: an admin turned it off")
    return skill


def skill_detail_answer(identity: Identity, slug: str) -> SkillDetailOut:
    """What /skills/{slug} answers (the endpoint and the MCP tool ``get_skill``): see ``skill_readable``."""
    return SkillDetailOut.from_orm(skill_readable(identity, slug))


def roots_with_latest_job(*, roots: QuerySet[WorkspaceRoot]) -> list[WorkspaceRoot]:
    """``roots``, each with ``latest_job`` (None before its first): two queries, not one per root."""
    # DISTINCT ON: the newest job of every root in one query.
    latest = {
        job.root_id: job
        for job in IndexJob.objects.filter(root__in=roots)
        .select_related("root")
        .order_by("root_id", "-created_at")
        .distinct("root_id")
    }
    ahead = jobs_ahead(latest.values())  # one more query, and only when one of them is queued
    for job in latest.values():
        job.queued_behind = ahead.get(job.pk)  # type: ignore[attr-defined]  # for JobOut, like an annotation
    listed = list(roots)
    for root in listed:
        root.latest_job = latest.get(root.pk)  # type: ignore[attr-defined]  # for RootOut, like an annotation
    return listed


def file_commit(*, root_id: int, path: str) -> tuple[str, str]:
    """A git root's file: the commit its chunks were indexed at, and the root's permalink template ("" for others).

    One query, for the viewer: the active generation's chunks of the file (all written together, so one commit).
    """
    row = (
        Chunk.objects.filter(source__root_id=root_id, source__root__git_url__gt="", path=path)
        .filter(generation=F("source__active_generation"))
        .values_list(f"metadata__{COMMIT_KEY}", "source__root__git_permalink")
        .first()
    )
    return (row[0] or "", row[1] or "") if row else ("", "")


def job_get(job_id: int) -> IndexJob:
    job = IndexJob.objects.select_related("root").filter(pk=job_id).first()
    if job is None:
        raise NotFound(f"index job {job_id} does not exist")
    return job


FILES_SHOWN = 200  # a page of a root's files (the root's own page shows the first)


def root_files_summary(*, root: WorkspaceRoot, scope: Scope, path_contains: str = "", page: int = 1) -> dict:
    """What a root produced: per indexed file its chunks, model, when and hash; and the skipped files of its last job.

    Files of segments outside ``scope`` (one gated to a channel the viewer lacks) are left out, skipped ones too.
    ``path_contains`` and ``page``: the files listed, FILES_SHOWN a page by path (the totals count them all).
    """
    sources = root_sources(root).filter(pk__in=scope.source_ids_sql(enabled_only=False))
    files = IndexedFile.objects.filter(source__in=sources, generation=F("source__active_generation"))
    totals = files.aggregate(files=Count("pk"), chunks=Sum("chunk_count"), last=Max("indexed_at"))
    waiting = Chunk.objects.filter(
        source__in=sources, generation=F("source__active_generation"), vector_pending=True
    ).count()
    listed = files.filter(path__icontains=path_contains) if path_contains else files
    pages = Paginator(listed.select_related("embedding_model", "source").order_by("path"), FILES_SHOWN)
    shown = pages.get_page(page)
    last = root.jobs.first()
    seen = root_path_visible(root=root, scope=scope)
    return {
        "files": list(shown),
        "page": shown,
        "path_contains": path_contains,
        "total_files": totals["files"] or 0,
        "total_chunks": totals["chunks"] or 0,
        "waiting_chunks": waiting,  # written words first, their vectors still to come
        "last_indexed": totals["last"],
        "more": max((totals["files"] or 0) - len(shown), 0),  # files not on this page
        "skipped": [row for row in last.errors if seen(row.get("path", ""))] if last else [],
        "last_job": last,
    }


def job_errors_narrowed(*, job: IndexJob, scope: Scope | None) -> IndexJob:
    """``job`` with only the errors (skipped and failed files) of segments ``scope`` sees; None: all of them.

    For the API's answers, as the admin's job page shows them: a person granted bot alpha but not channel finance
    learns no file name of alpha's finance-gated segment. Only the row in memory changes, never the stored one.
    """
    if scope is not None and job.errors:
        seen = root_path_visible(root=job.root, scope=scope)
        job.errors = [row for row in job.errors if seen(row.get("path", ""))]
    return job


def root_path_visible(*, root: WorkspaceRoot, scope: Scope) -> Callable[[str], bool]:
    """Whether ``scope`` sees the segment of ``root`` that owns a path.

    For lists of paths that are not chunks (skipped files).

    The owner is decided as indexing decides it: the longest matching glob,
    else the root's default segment.
    """
    visible = set(
        root_sources(root).filter(pk__in=scope.source_ids_sql(enabled_only=False)).values_list("pk", flat=True)
    )
    segments = sorted(root.segments.order_by("pk"), key=lambda segment: -len(segment.path_glob))
    owners = [(pathspec.GitIgnoreSpec.from_lines([segment.path_glob]), segment.source_id) for segment in segments]

    def seen(path: str) -> bool:
        owner = next((source_id for matcher, source_id in owners if path and matcher.match_file(path)), root.source_id)
        return owner in visible

    return seen


def index_overview(*, scope: Scope) -> dict:
    """The index at a glance, for the admin: sources, chunks, models, failures, queue, workers and beat.

    Counts, failing items and jobs (whose messages name server paths) cover
    only the sources ``scope`` sees, disabled ones included; the queue and
    the health of workers, beat and models are the service's, not a tenant's.
    """
    visible = scope.source_ids_sql(enabled_only=False)
    kinds: dict[str, Mapping[str, Any]] = {
        row["kind"]: row
        for row in Source.objects.filter(pk__in=visible)
        .values("kind")
        .annotate(sources=Count("pk", distinct=True), enabled=Count("pk", filter=Q(enabled=True), distinct=True))
    }
    # Chunks search reads: of enabled sources only (a superseded or unapproved memory, a disabled skill keep
    # their rows, never searched).
    chunks = {
        kind: (n, waiting)
        for kind, n, waiting in Chunk.objects.filter(
            generation=F("source__active_generation"), source__in=scope.source_ids_sql()
        )
        .values_list("source__kind")
        .annotate(n=Count("pk"), waiting=Count("pk", filter=Q(vector_pending=True)))
    }
    rows = [
        {
            "kind": label,
            "sources": kinds.get(kind, {}).get("sources", 0),
            "enabled": kinds.get(kind, {}).get("enabled", 0),
            "chunks": chunks.get(kind, (0, 0))[0],
            # Written words first and searchable by their words; by meaning once their vectors exist.
            "waiting": chunks.get(kind, (0, 0))[1],
        }
        for kind, label in Source.Kind.choices
        if kind != Source.Kind.DATASET
    ]
    models = list(
        EmbeddingModel.objects.annotate(vectors=Count("chunks", filter=Q(chunks__source__in=visible))).order_by(
            "-vectors"
        )
    )
    failing = [
        *Skill.objects.filter(index_status=IndexStatus.FAILED, source__in=visible).order_by("slug"),
        *Tool.objects.filter(index_status=IndexStatus.FAILED, source__in=visible).order_by("key"),
    ]
    jobs = IndexJob.objects.filter(root__source__in=visible).select_related("root")
    failed_jobs = list(jobs.filter(status=JobStatus.FAILED).order_by("-created_at")[:10])
    running = list(jobs.filter(status__in=ACTIVE_JOB_STATUSES))
    for job in running:
        job.report = job_progress_read(job)  # type: ignore[attr-defined]  # the job page's numbers, like an annotation
    embedding = embedding_config()
    health = health_check(embedding=embedding, llm=llm_config())
    return {
        "kinds": rows,
        "models": models,
        "failing": failing,
        "failed_jobs": failed_jobs,
        "running": running,
        "health": health,
        "queue": queue_lengths(QUEUES),
        "llm": _llm_models(health),
        "llm_recent_minutes": RECENT_MINUTES,
        # RAG_EMBEDDING_BACKEND=auto: what this machine measured (the cache under RAG_VAR_DIR/models), else None.
        "backend_choices": choices_listed() if embedding.backend == AUTO else None,
    }


def _llm_models(health: Health) -> list[dict] | None:
    """Each language model's breaker and recent health, from the health check (None: no language model configured)."""
    check = health.checks.get("llm")
    if check is None:
        return None

    def when(seconds: float | None) -> datetime | None:
        return None if seconds is None else datetime.fromtimestamp(seconds, tz=UTC)

    return [
        {**model, "opened_until": when(model["opened_until"]), "last_error_at": when(model["last_error_at"])}
        for model in check.details["models"]
    ]
