from typing import Literal

from django.conf import settings
from ninja import Field, Schema


class SearchIn(Schema):
    query: str = Field(..., min_length=1, max_length=2000, description="What to look for, in plain words.")
    k: int = Field(settings.RAG_SEARCH_DEFAULT_K, ge=1, le=settings.RAG_SEARCH_MAX_K, description="How many hits to return.")
    mode: Literal["hybrid", "lexical", "vector"] = Field("hybrid", description="Which channels to use.")
    mmr: bool = Field(False, description="Re-order the fused pool by Maximal Marginal Relevance (fewer near-duplicates).")
    mmr_lambda: float | None = Field(None, ge=0.0, le=1.0, description="MMR trade-off; default RAG_MMR_LAMBDA (0.7).")
    sources: list[Literal["skill", "file", "tool"]] = Field(default_factory=list, description="Kinds of source to search; empty = all.")
    bot_id: str = Field("", max_length=128, description="Caller's bot; empty sees shared sources only.")
    client_id: str = Field("", max_length=128, description="Caller's client; empty sees shared sources only.")
    channel: str = Field("", max_length=128, description="Caller's channel, for segments gated to channels.")


class ChannelOut(Schema):
    rank: int
    score: float


class HitOut(Schema):
    chunk_id: int
    source: str = Field(..., description="Kind of source: skill, file or tool.")
    source_key: str
    title: str
    path: str
    heading_path: str
    start_line: int
    end_line: int
    citation: str
    language: str
    symbol: str
    content: str
    score: float = Field(..., description="Fused score (RRF) in hybrid mode, else the channel's own score.")
    channels: dict[str, ChannelOut] = Field(..., description="Rank and score in each channel that found the chunk.")
    tool: dict | None = Field(None, description="For tool hits: the full schema in OpenAI function format.")


class SearchOut(Schema):
    query: str
    mode: str
    k: int
    hits: list[HitOut]


class ErrorOut(Schema):
    error: str
    detail: list[str] | dict = Field(default_factory=list)


class ToolSearchIn(Schema):
    query: str = Field(..., min_length=1, max_length=2000)
    k: int = Field(10, ge=1, le=settings.RAG_SEARCH_MAX_K)
    bot_id: str = Field("", max_length=128)
    client_id: str = Field("", max_length=128)


class ToolHitOut(Schema):
    key: str
    score: float
    openai_schema: dict = Field(..., description="The tool in OpenAI function format: {type: function, function: {...}}.")


class ToolSearchOut(Schema):
    query: str
    tools: list[ToolHitOut]
