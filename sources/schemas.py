from datetime import datetime

from ninja import Schema


class SkillOut(Schema):
    slug: str
    title: str
    enabled: bool
    index_status: str
    indexed_at: datetime | None
    last_error: str
    chunks: int
