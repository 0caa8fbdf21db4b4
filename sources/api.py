from django.db.models import Count
from ninja import Router
from ninja.responses import Status

from rag_site.errors import ApplicationError
from retrieval.access import Identity, scope_for
from retrieval.auth import HEALTH_AUTH, MANAGE_AUTH, READ_AUTH, manage_required
from retrieval.schemas import API_ERRORS, ErrorOut
from sources import tasks
from sources.health import health_check
from sources.models import IndexJob, Skill, Source, WorkspaceRoot
from sources.schemas import CheckOut, HealthOut, JobOut, ReindexIn, ReindexOut, RootOut, SkillDetailOut, SkillOut

router = Router(tags=["sources"])
ERRORS = {**API_ERRORS, 404: ErrorOut}


def _skills(identity: Identity):
    """The skills ``identity`` may see (the same scope rule as search; disabled ones included)."""
    scope = scope_for(identity, kinds=[Source.Kind.SKILL])
    visible = Skill.objects.filter(source__in=scope.source_ids_sql(enabled_only=False))
    return visible.annotate(chunk_count=Count("source__chunks")).select_related("source")


def _skill_fields(skill: Skill) -> dict:
    return {
        "slug": skill.slug,
        "title": skill.title or (skill.source.title if skill.source_id else "") or skill.slug,
        "enabled": skill.enabled,
        "index_status": skill.index_status,
        "indexed_at": skill.indexed_at,
        "last_error": skill.last_error,
        "chunks": skill.chunk_count,
    }


@router.get("/skills", response={200: list[SkillOut], **ERRORS}, auth=READ_AUTH)
def skills_list(request):
    """The skills the caller may see, with their indexing status and, when indexing failed, why."""
    return [SkillOut(**_skill_fields(skill)) for skill in _skills(request.auth)]


def skill_detail_answer(identity: Identity, slug: str) -> SkillDetailOut:
    """What /skills/{slug} answers (the endpoint and the MCP tool ``get_skill``).

    A skill outside the caller's scope answers 404 with the same message as
    one that does not exist: the answer never tells them apart. A disabled
    skill answers 404 too, as search and context hide it; the list still
    shows it, with ``enabled: false``, so saying why hides nothing.
    """
    skill = _skills(identity).filter(slug=slug).first()
    if skill is None:
        raise ApplicationError(f"skill {slug!r} does not exist", status=404)
    if not skill.enabled:
        raise ApplicationError(f"skill {slug!r} is disabled: an admin turned it off", status=404)
    return SkillDetailOut(**_skill_fields(skill), body=skill.body, metadata=skill.metadata)


@router.get("/skills/{slug}", response={200: SkillDetailOut, **ERRORS}, auth=READ_AUTH)
def skill_detail(request, slug: str):
    """One enabled skill the caller may see, with its markdown body and parsed front matter; any other answers 404."""
    return skill_detail_answer(request.auth, slug)


def _job_out(job: IndexJob) -> JobOut:
    return JobOut(
        id=job.pk, root_id=job.root_id, root=job.root.name, status=job.status, trigger=job.trigger, attempt=job.attempt,
        force=job.force, message=job.message, progress=job.progress, files_total=job.files_total,
        files_seen=job.files_seen, files_changed=job.files_changed, files_unchanged=job.files_unchanged,
        files_skipped=job.files_skipped, files_failed=job.files_failed, files_deleted=job.files_deleted,
        chunks_embedded=job.chunks_embedded, chunks_deleted=job.chunks_deleted, errors=job.errors, worker=job.worker,
        created_at=job.created_at, started_at=job.started_at, finished_at=job.finished_at,
    )


@router.get("/roots", response={200: list[RootOut], **ERRORS}, auth=MANAGE_AUTH)
def roots_list(request):
    """Workspace roots with their latest index job. Needs the manage permission (roots show server paths)."""
    manage_required(request)
    # DISTINCT ON: the newest job of every root in one query, not one per root.
    latest = {job.root_id: job for job in IndexJob.objects.select_related("root").order_by("root_id", "-created_at").distinct("root_id")}
    return [
        RootOut(id=root.pk, name=root.name, path=root.path, enabled=root.enabled, last_verified_at=root.last_verified_at,
                last_job=_job_out(latest[root.pk]) if root.pk in latest else None)
        for root in WorkspaceRoot.objects.all()
    ]


@router.post("/roots/{root_id}/reindex", response={202: ReindexOut, 200: ReindexOut, 409: ErrorOut, **ERRORS}, auth=MANAGE_AUTH)
def root_reindex(request, root_id: int, payload: ReindexIn):
    """Queue a re-index (202). If one is already queued or running, that job is returned (200, created=false).

    Needs the manage permission. Without ``force`` a root verified within its cooldown is refused (429), and
    unchanged files are not embedded again; ``force`` re-embeds every file."""
    manage_required(request)
    job, created = tasks.root_reindex_request(root_id=root_id, force=payload.force, trigger="api")
    job = IndexJob.objects.select_related("root").get(pk=job.pk)
    return Status(202 if created else 200, ReindexOut(created=created, job=_job_out(job)))


@router.get("/index-jobs/{job_id}", response={200: JobOut, **ERRORS}, auth=MANAGE_AUTH)
def index_job(request, job_id: int):
    """Status, counters, progress and the first errors of one index job. Needs the manage permission."""
    manage_required(request)
    job = IndexJob.objects.select_related("root").filter(pk=job_id).first()
    if job is None:
        raise ApplicationError(f"index job {job_id} does not exist", status=404)
    return _job_out(job)


@router.get("/health", response={200: HealthOut, 503: HealthOut, 401: ErrorOut, 429: ErrorOut}, auth=HEALTH_AUTH,
            tags=["health"], exclude_none=True)
def health(request):
    """Database, broker, workers, beat and embedding model: 200 when the database and the broker answer, else 503.

    ``status`` is "ok" when every check passes, else "degraded". Answers
    without credentials (load balancers): then only ``ok`` per check. With the
    manage permission each check has ``details`` (ages, latencies, errors)."""
    report = health_check()
    detailed = request.auth.can_manage
    checks = {name: CheckOut(ok=check.ok, details=check.details if detailed else None) for name, check in report.checks.items()}
    return Status(200 if report.critical_ok else 503, HealthOut(status=report.status, checks=checks))
