"""Read queries behind the sources API and the MCP tools: what a caller may see, loaded in one query each."""

from django.db.models import Count, QuerySet

from rag_site.errors import NotFound
from retrieval.access import Identity, scope_for
from sources.models import IndexJob, Skill, Source, WorkspaceRoot


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


def roots_with_latest_job() -> list[WorkspaceRoot]:
    """Every root, each with ``latest_job`` (None before its first): two queries, not one per root."""
    # DISTINCT ON: the newest job of every root in one query.
    latest = {job.root_id: job for job in IndexJob.objects.select_related("root").order_by("root_id", "-created_at").distinct("root_id")}
    roots = list(WorkspaceRoot.objects.all())
    for root in roots:
        root.latest_job = latest.get(root.pk)
    return roots


def job_get(job_id: int) -> IndexJob:
    job = IndexJob.objects.select_related("root").filter(pk=job_id).first()
    if job is None:
        raise NotFound(f"index job {job_id} does not exist")
    return job
