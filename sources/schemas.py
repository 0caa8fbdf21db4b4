from datetime import datetime
from typing import Any, Literal

from ninja import Field, Schema


class SkillOut(Schema):
    slug: str
    title: str
    enabled: bool
    index_status: str
    indexed_at: datetime | None
    last_error: str
    chunks: int


class SkillDetailOut(SkillOut):
    body: str = Field(..., description="The skill's markdown, front matter included, exactly as stored.")
    metadata: dict[str, Any] = Field(..., description="The parsed YAML front matter ({} when there is none).")


class ReindexIn(Schema):
    force: bool = False


class JobOut(Schema):
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


class ReindexOut(Schema):
    created: bool
    job: JobOut


class RootOut(Schema):
    id: int
    name: str
    path: str
    enabled: bool
    last_verified_at: datetime | None
    last_job: JobOut | None


class CheckOut(Schema):
    ok: bool
    details: dict[str, Any] | None = None


class HealthOut(Schema):
    status: Literal["ok", "degraded"]
    checks: dict[str, CheckOut]
