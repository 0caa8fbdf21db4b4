from ninja import Body, Router
from ninja.responses import Status
from pydantic_core import PydanticUndefined

from access.auth import HEALTH_AUTH, MANAGE_AUTH, READ_AUTH
from access.identity import Identity, identity_anonymous, scope_for
from access.managing import manages_every_row, row_managed, rows_managed, shared_writable
from access.ratelimit import rate_limit_check
from access.rights import Right
from access.scope import Scope
from kernel.config import llm_config
from kernel.errors import Unauthenticated
from retrieval.schemas import API_ERRORS, ErrorOut
from sources import tasks
from sources.config import embedding_config, webhook_key
from sources.git_hooks import webhook_delivery_first, webhook_verified
from sources.health import health_check
from sources.models import IndexJob, WorkspaceRoot
from surfaces.schemas import (
    CheckOut,
    HealthOut,
    HookOut,
    JobOut,
    ReindexIn,
    ReindexOut,
    RootOut,
    SkillDetailOut,
    SkillOut,
)
from surfaces.selectors import job_errors_narrowed, job_get, roots_with_latest_job, skill_detail_answer, skills_visible

# No body: the defaults (one frozen instance, shared by every request). Given as a factory: a default would be
# written into the schema as the body's default, which client generators refuse (openapi-python-client: "ModelProperty
# cannot have a default value"); without it the schema says the body is optional and each field has its default.
NO_REINDEX_BODY = ReindexIn()

router = Router(tags=["sources"])
ERRORS = {**API_ERRORS, 404: ErrorOut}
# /health answers its own 503 (the report) and may be called without credentials: 403 and 422 cannot happen.
HEALTH_ERRORS = {code: ErrorOut for code in (400, 401, 429)}


@router.get("/skills", response={200: list[SkillOut], **ERRORS}, auth=READ_AUTH)
def skills_list(request):
    """The skills the caller may see, with their indexing status and, when indexing failed, why."""
    return list(skills_visible(request.auth))


@router.get("/skills/{slug}", response={200: SkillDetailOut, **ERRORS}, auth=READ_AUTH)
def skill_detail(request, slug: str):
    """One enabled skill the caller may see, with its markdown body and parsed front matter; any other answers 404."""
    return skill_detail_answer(request.auth, slug)


@router.get("/roots", response={200: list[RootOut], **ERRORS}, auth=MANAGE_AUTH)
def roots_list(request):
    """Workspace roots with their latest index job (they show server paths). Needs sources.view_workspaceroot (a
    person: the roots their grants cover) or a manage key (every root)."""
    roots = rows_managed(request.auth, WorkspaceRoot.objects.all(), right=Right.VIEW_ROOTS, source_path="source")
    listed = roots_with_latest_job(roots=roots)
    scope = _errors_scope(request.auth)
    for root in listed:
        if (job := getattr(root, "latest_job", None)) is not None:  # set by roots_with_latest_job
            job_errors_narrowed(job=job, scope=scope)
    return listed


def _errors_scope(identity: Identity) -> Scope | None:
    """Whose files a job's errors may name: every one for a manage key or a superuser, else the person's scope."""
    return None if manages_every_row(identity) else scope_for(identity)


@router.post(
    "/roots/{root_id}/reindex", response={202: ReindexOut, 200: ReindexOut, 409: ErrorOut, **ERRORS}, auth=MANAGE_AUTH
)
def root_reindex(
    request, root_id: int, payload: ReindexIn = Body(PydanticUndefined, default_factory=lambda: NO_REINDEX_BODY)
):
    """Queue a re-index (202). If one is already queued or running, that job is returned (200, created=false).

    Needs sources.change_workspaceroot (a person: a root their grants cover, others 404; a shared root also
    access.write_shared, as the admin's re-index button does) or a manage key. Without
    ``force`` a root verified within its cooldown is refused (429), and
    unchanged files are not embedded again; ``force`` re-embeds every file. The body is empty, ``{}`` or
    ``{"force": true}``: any other value or field is refused (422) and queues nothing."""
    root = row_managed(
        request.auth,
        WorkspaceRoot.objects.all(),
        root_id,
        right=Right.REINDEX_ROOTS,
        source_path="source",
        what="workspace root",
    )
    # The admin's re-index of a shared row needs the shared right too: the API lets a person do what the admin does.
    shared_writable(request.auth, bot_id=root.bot_id, client_id=root.client_id, channels=root.channels)
    job, created = tasks.root_reindex_request(root_id=root.pk, force=payload.force, trigger="api")
    # The job as a model: the response schema reads it (JobOut's resolvers need the row, not a copy).
    answer = job_errors_narrowed(job=job_get(job.pk), scope=_errors_scope(request.auth))
    return Status(202 if created else 200, {"created": created, "job": answer})


@router.post(
    "/roots/{root_id}/hook",
    response={202: HookOut, 200: HookOut, 409: ErrorOut, **API_ERRORS},
    auth=None,
    tags=["sources"],
)
def root_hook(request, root_id: int):
    """A git host's push event for a git root: queues a fetch job at once on the interactive queue (202, its id).

    No API key: the request is verified with the root's webhook secret (set in the admin): GitHub's
    ``X-Hub-Signature-256: sha256=HMAC``, Gitea's ``X-Gitea-Signature: HMAC`` (hex HMAC-SHA256 of the body) or
    GitLab's ``X-Gitlab-Token: SECRET``. Unsigned, wrongly signed, or not a git root: 401, nothing queued.
    A replay of a delivery (the same body, or the same delivery id, within a week): 200, status "replay", no job.
    Rate-limited per address like anonymous callers."""
    caller = identity_anonymous(address=request.META.get("REMOTE_ADDR", ""))
    rate_limit_check(bucket=f"hook:{caller.rate_bucket}", limit=caller.rate_limit)
    root = WorkspaceRoot.objects.filter(pk=root_id).exclude(git_url="").first()
    # One answer for an unknown root and a bad signature: the hook tells a stranger nothing about which roots exist.
    if root is None or not webhook_verified(
        root=root, headers=request.headers, body=request.body, secret_key=webhook_key()
    ):
        raise Unauthenticated("the webhook's signature or token is missing or does not match the root's secret")
    if not webhook_delivery_first(root=root, headers=request.headers, body=request.body):
        return Status(200, HookOut(job_id=None, status="replay"))
    job = tasks.root_push_request(root_id=root.pk)
    return Status(202, HookOut(job_id=job.pk, status=job.status))


@router.get("/index-jobs/{job_id}", response={200: JobOut, **ERRORS}, auth=MANAGE_AUTH)
def index_job(request, job_id: int):
    """Status, counters, progress and the first errors of one index job. Needs sources.view_indexjob (a person: a
    job of a root their grants cover, others 404) or a manage key."""
    job = row_managed(
        request.auth,
        IndexJob.objects.all(),
        job_id,
        right=Right.VIEW_JOBS,
        source_path="root__source",
        what="index job",
    )
    return job_errors_narrowed(job=job_get(job.pk), scope=_errors_scope(request.auth))


@router.get(
    "/health",
    response={200: HealthOut, 503: HealthOut, **HEALTH_ERRORS},
    auth=HEALTH_AUTH,
    tags=["health"],
    exclude_none=True,
)
def health(request):
    """Database, broker, workers, beat, embedding model and, when one is configured, the language model
    (``llm``) and the read replicas (``replicas``: fails while one is down or lagging, and searches read the
    primary instead): 200 when the database and the broker answer, else 503.

    ``status`` is "ok" when every check passes, else "degraded"; ``llm`` fails
    only when every model of its chain is cooling down in the circuit breaker.
    Answers without credentials (load balancers): then only ``ok`` per check.
    With access.view_health_details (or a manage key) each check has ``details`` (ages, latencies,
    errors; for ``llm`` each model's breaker state, opened-until, recent errors
    by class, last error and latency)."""
    report = health_check(embedding=embedding_config(), llm=llm_config())
    detailed = request.auth.may(Right.VIEW_HEALTH_DETAILS)
    checks = {
        name: CheckOut(ok=check.ok, details=check.details if detailed else None)
        for name, check in report.checks.items()
    }
    return Status(200 if report.critical_ok else 503, HealthOut(status=report.status, checks=checks))
