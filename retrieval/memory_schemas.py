"""The request and answer shapes of memories, shared by the HTTP API (surfaces/routes/memories.py) and MCP."""

from datetime import datetime
from typing import Annotated, Literal

from ninja import Field, Schema
from pydantic import AfterValidator, AwareDatetime, ConfigDict, StringConstraints, field_validator

from retrieval.schemas import BodyIn, Query, ScopeIn, _no_control_characters
from sources.memories import MEMORY_MAX_CHARS
from sources.models import SCOPE_NAME, Memory, MemoryStatus, source_key

MemoryText = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=MEMORY_MAX_CHARS),
    AfterValidator(_no_control_characters),
]
Label = Annotated[str, StringConstraints(strip_whitespace=True, max_length=200), AfterValidator(_no_control_characters)]
Citation = Annotated[
    str, StringConstraints(strip_whitespace=True, max_length=1000), AfterValidator(_no_control_characters)
]
_SCOPE_HELP = "Who may read it: {}. Default: the caller's own; within it only (a wider one is refused, 403)."


class MemoryIn(BodyIn):
    # A misspelt field ("expire_at") refused, not ignored: a fact kept forever by a typo is lost input.
    model_config = ConfigDict(extra="forbid")

    text: MemoryText = Field(
        ..., description=f"The fact to remember, in a sentence or a few (1-{MEMORY_MAX_CHARS} characters)."
    )
    supersedes: int | None = Field(
        None,
        ge=1,
        description="The id of a memory this one replaces: it is kept as history, marked superseded, and no "
        "longer served. It must be one the caller may change.",
    )
    conversation_id: Label = Field("", description="The conversation or run the fact was learnt in.")
    citation: Citation = Field("", description="Where the fact comes from: a citation from search, a URL.")
    expires_at: AwareDatetime | None = Field(
        None, description="When it stops being served (ISO 8601 with a time zone); default: never."
    )
    bot_id: str | None = Field(None, pattern=f"^(?:{SCOPE_NAME})?$", description=_SCOPE_HELP.format("this bot"))
    client_id: str | None = Field(None, pattern=f"^(?:{SCOPE_NAME})?$", description=_SCOPE_HELP.format("this client"))
    channels: list[Annotated[str, StringConstraints(pattern=f"^{SCOPE_NAME}$")]] | None = Field(
        None, max_length=50, description=_SCOPE_HELP.format("these channels")
    )


class MemoryPatchIn(BodyIn):
    """Only the fields sent change. A new ``text`` makes a new version that supersedes this one."""

    model_config = ConfigDict(extra="forbid")

    text: MemoryText | None = Field(
        None, description="New text: a new memory replaces this one (kept as history, marked superseded)."
    )
    conversation_id: Label | None = None
    citation: Citation | None = None
    expires_at: AwareDatetime | None = Field(None, description="A new expiry; null: never expires.")

    @field_validator("text", "conversation_id", "citation", mode="before")
    @classmethod
    def _not_null(cls, value: object) -> object:
        if value is None:
            raise ValueError("leave the field out to keep it; null is not a value here")
        return value


class MemoryOut(Schema):
    id: int
    text: str
    status: MemoryStatus = Field(
        ...,
        description="active: served; pending: awaiting an admin's approval; superseded: replaced by "
        "`superseded_by`; expired: past `expires_at`. Only active memories are searched and recalled.",
    )
    citation_key: str = Field(..., description="How search and context cite it: memory:<id>.")
    bot_id: str
    client_id: str
    channels: list[str]
    author: str = Field(..., description="Who wrote it: the API key or account, as named then.")
    conversation_id: str
    citation: str
    created_at: datetime
    expires_at: datetime | None
    approved_at: datetime | None
    supersedes: int | None = Field(None, description="The memory this one replaced.")
    superseded_by: int | None = Field(None, description="The memory that replaced this one.")
    superseded_at: datetime | None
    index_status: str = Field(..., description="pending, queued, running, indexed or failed (then last_error).")
    last_error: str

    @classmethod
    def of(cls, memory: Memory) -> "MemoryOut":
        newer = getattr(memory, "superseded_by", None) if memory.superseded_at else None
        return cls(
            id=memory.pk,
            text=memory.text,
            status=memory.status,
            citation_key=source_key(memory),
            bot_id=memory.bot_id,
            client_id=memory.client_id,
            channels=memory.channels.split(),
            author=memory.author,
            conversation_id=memory.conversation_id,
            citation=memory.citation,
            created_at=memory.created_at,
            expires_at=memory.expires_at,
            approved_at=memory.approved_at,
            supersedes=memory.supersedes_id,
            superseded_by=newer.pk if newer is not None else None,
            superseded_at=memory.superseded_at,
            index_status=memory.index_status,
            last_error=memory.last_error,
        )


class MemoryListIn(Schema):
    """GET /memories's query string."""

    status: Literal["active", "pending", "superseded", "expired", "all"] = Field(
        "active", description="Which memories: active (default, what is served) or the others."
    )
    conversation_id: Label | None = Field(None, description="Only those learnt in this conversation or run.")
    limit: int = Field(50, ge=1, le=200, description="At most this many, newest first.")


class MemoryListOut(Schema):
    memories: list[MemoryOut]


class RecallIn(ScopeIn):
    query: Query = Field(..., description="What to recall, in words or the query language (docs/api.md; not re:).")
    k: int = Field(5, ge=1, le=50, description="How many memories at most.")


class RecalledOut(MemoryOut):
    score: float = Field(..., description="The search score (fused, or reranked).")


class RecallOut(Schema):
    query: str
    memories: list[RecalledOut]
    warnings: list[str] = Field(default_factory=list)


class ForgetIn(BodyIn):
    id: int = Field(..., ge=1, description="The memory to forget (its `id`, or the number in memory:<id>).")


class ForgetOut(Schema):
    id: int
    forgotten: bool = True
