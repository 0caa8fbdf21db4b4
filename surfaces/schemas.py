from datetime import datetime
from typing import Any, Literal

from ninja import Field, Schema
from pydantic import ConfigDict

from retrieval.schemas import BodyIn, Flag
from sources.jobs import job_state, jobs_ahead
from sources.queues import job_queue


class SkillOut(Schema):
    """Read from a Skill of ``selectors.skills_visible`` (it counts the chunks)."""

    slug: str
    title: str
    enabled: bool
    index_status: str
    indexed_at: datetime | None
    last_error: str
    chunks: int

    @staticmethod
    def resolve_chunks(skill) -> int:
        return skill.chunk_count

    @staticmethod
    def resolve_title(skill) -> str:
        # The admin's title, else the one indexing found (front matter, first heading), else the slug.
        return skill.title or (skill.source.title if skill.source_id else "") or skill.slug


class SkillDetailOut(SkillOut):
    body: str = Field(..., description="The skill's markdown, front matter included, exactly as stored.")
    metadata: dict[str, Any] = Field(..., description="The parsed YAML front matter ({} when there is none).")


class ReindexIn(BodyIn):
    """No body, {} or {"force": true}; anything else is refused, so a typo never queues the wrong job."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    force: Flag = Field(
        default=False, description="Re-embed every file, even unchanged ones, and ignore the root's cooldown."
    )


class JobOut(Schema):
    """Read from an IndexJob (with its root loaded)."""

    id: int
    root_id: int
    root: str
    status: str
    trigger: str
    attempt: int
    force: bool
    message: str
    progress: float
    files_total: int
    files_seen: int
    files_changed: int
    files_unchanged: int
    files_skipped: int
    files_failed: int
    files_deleted: int
    chunks_embedded: int
    chunks_deleted: int
    errors: list[dict]
    worker: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    queue: str = Field(..., description="The queue it runs on: bulk (a full walk) or interactive (a few given paths).")
    queued_behind: int | None = Field(
        ..., description="While queued: how many jobs are ahead of it on its queue (running or queued before it)."
    )
    state: str = Field(
        ..., description='In words: "queued behind 2 jobs on the bulk queue", "started" once it runs, or its outcome.'
    )

    @staticmethod
    def resolve_root(job) -> str:
        return job.root.name

    @staticmethod
    def resolve_queue(job) -> str:
        return job_queue(job)

    @staticmethod
    def resolve_queued_behind(job) -> int | None:
        if job.status != "queued":
            return None
        if getattr(job, "queued_behind", None) is None:
            # One query for this job; a list of jobs gets its counts at once (selectors.roots_with_latest_job).
            job.queued_behind = jobs_ahead([job])[job.pk]
        return job.queued_behind

    @staticmethod
    def resolve_state(job) -> str:
        return job_state(job, JobOut.resolve_queued_behind(job))


class ReindexOut(Schema):
    created: bool
    job: JobOut


class HookOut(Schema):
    job_id: int = Field(..., description="The fetch job queued (or the one already queued or running).")
    status: str


class RootOut(Schema):
    id: int
    name: str
    path: str
    enabled: bool
    last_verified_at: datetime | None
    last_job: JobOut | None

    @staticmethod
    def resolve_last_job(root):
        return root.latest_job  # set by selectors.roots_with_latest_job


class CheckOut(Schema):
    ok: bool
    details: dict[str, Any] | None = None


class HealthOut(Schema):
    status: Literal["ok", "degraded"]
    checks: dict[str, CheckOut]


class DocumentOut(Schema):
    """An uploaded document (sources.models.UploadedDocument) with its indexing status and, when it failed, why."""

    id: int
    name: str
    size: int
    sha256: str = Field(..., description="SHA-256 of the uploaded bytes.")
    bot_id: str
    client_id: str
    channels: list[str]
    enabled: bool
    index_status: str
    indexed_at: datetime | None
    last_error: str
    created_at: datetime
    duplicate_of: int | None = Field(
        None, description="On upload: the existing document with the same bytes (nothing new was stored)."
    )

    @staticmethod
    def resolve_sha256(document) -> str:
        return document.file_sha256

    @staticmethod
    def resolve_channels(document) -> list[str]:
        return document.scope_fields["channels"]

    @staticmethod
    def resolve_duplicate_of(document) -> int | None:
        return getattr(document, "duplicate_of", None)  # set by the upload route only
