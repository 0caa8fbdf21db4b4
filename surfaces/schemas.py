from datetime import datetime
from typing import Any, Literal

from ninja import Field, Schema
from pydantic import ConfigDict

from retrieval.schemas import BodyIn, Flag
from sources.job_report import job_outcome_read, job_progress_read, job_searchable
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


class OutcomeOut(Schema):
    level: Literal["success", "warning", "error", "info"] = Field(
        ..., description='"warning": it succeeded but indexed nothing (an empty root, every file skipped).'
    )
    title: str = Field(..., description='"Succeeded", "Nothing to index", "Cancelled" or "Failed".')
    text: str = Field(..., description="What it did, counted: files indexed, chunks embedded, left out and skipped.")


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
    progress: float = Field(..., description="Share done, 0 to 1: never lower than before; 1 only once it succeeded.")
    percent: int = Field(..., description="The same share in whole percent, as the admin pages show it.")
    phase: str = Field(
        ..., description="queued, listing, reading, embedding or finishing while it is active; then its status."
    )
    rate: float | None = Field(..., description="Recent pace (about the last 30 s), in rate_unit.")
    rate_unit: str = Field(..., description='"chunks/s" while there is something to embed, else "files/s".')
    eta_seconds: int | None = Field(..., description="Time left at the recent pace; null while it cannot be told.")
    progress_text: str = Field(..., description='In words: "Embedding: 42% · 18.5 chunks/s · about 3 min left".')
    outcome: OutcomeOut | None = Field(..., description="Once it has ended: what it did. Null while it is active.")
    left_out: dict[str, int] = Field(
        ..., description="Files (and directories pruned whole) the walk left out, by reason: patterns, .gitignore..."
    )
    skipped_by_reason: dict[str, int]
    failed_by_reason: dict[str, int]
    files_total: int
    files_seen: int
    files_changed: int
    files_unchanged: int
    files_skipped: int
    files_failed: int
    files_deleted: int
    chunks_written: int = Field(
        ..., description="Chunks written so far: searchable by their words at once, before their vectors exist."
    )
    chunks_queued: int = Field(..., description="Chunks this job embeds (their vectors follow the words).")
    chunks_embedded: int
    chunks_deleted: int
    searchable: str = Field(
        ...,
        description='In words: "Searchable by words: 812 of 1,091 files (9,210 chunks written) · by meaning: '
        '3,200 of 9,210 chunks".',
    )
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
    def resolve_percent(job) -> int:
        return job_progress_read(job).percent

    @staticmethod
    def resolve_phase(job) -> str:
        return job_progress_read(job).phase

    @staticmethod
    def resolve_rate(job) -> float | None:
        rate = job_progress_read(job).rate
        return None if rate is None else round(rate, 2)

    @staticmethod
    def resolve_rate_unit(job) -> str:
        return job_progress_read(job).rate_unit

    @staticmethod
    def resolve_eta_seconds(job) -> int | None:
        return job_progress_read(job).eta_seconds

    @staticmethod
    def resolve_progress_text(job) -> str:
        return job_progress_read(job).summary

    @staticmethod
    def resolve_searchable(job) -> str:
        return job_searchable(job).text

    @staticmethod
    def resolve_outcome(job) -> OutcomeOut | None:
        outcome = job_outcome_read(job)
        return None if outcome is None else OutcomeOut(level=outcome.level, title=outcome.title, text=outcome.text)

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
    job_id: int | None = Field(
        ..., description="The fetch job queued (or the one already queued or running); null for a replay."
    )
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
        None, description="On upload: the existing document with the same bytes and scope (nothing new was stored)."
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
