from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from ninja.schema import DjangoGetter
from pydantic import AfterValidator, BeforeValidator, ConfigDict, Strict, StringConstraints, model_validator
from pydantic_core import PydanticCustomError

from kernel.text import control_characters_message
from retrieval.config import WireLimits
from retrieval.kinds import SearchKind
from sources.models import SCOPE_NAME

# Read once, at import: pydantic fixes a field's bounds and default when the class is made, and the OpenAPI
# schema publishes them, so these are the surface's wire limits for the process's life (a change needs a
# restart, as it always did). Everything that acts per request takes its config from the edge instead.
_LIMITS = WireLimits.from_settings()
GREP_MATCHES_CAP = _LIMITS.grep_max_matches  # the most lines one grep answers (its max_matches' bound)


def _no_control_characters(value: str) -> str:
    problem = control_characters_message(value, "the text")
    if problem:
        raise ValueError(problem)
    return value


# A request's yes/no field: JSON true or false only. Lax parsing read 0, 1,
# "yes" and "off" as booleans: a typo or a wrong type meant the default silently.
Flag = Annotated[bool, Strict()]


def _grouping(value: object) -> object:
    # One message naming the three values, not one per member of the union.
    if value is True or value is False or value == "file":
        return value
    raise ValueError('must be true, false or "file"')


# Search's grouping: a Flag, or "file" (one hit per file with its next chunks as snippets).
Grouping = Annotated[bool | Literal["file"], BeforeValidator(_grouping)]


_JSON_TYPES = {
    str: "a string",
    list: "an array",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


class BodyIn(Schema):
    """A JSON request body (or a nested object in one): an object of its fields, or it is refused.

    ninja's Schema also reads fields as attributes of any value, so a body of
    "AAA" or [null, null] passed as an object of defaults. A field it does not
    know is refused too (422 naming it): ``{"query": "x", "top_k": 3}`` was
    answered with the default k, a typo the caller never heard of.
    """

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _an_object(cls, data: object) -> object:
        # ninja's own validator runs first and wraps the value in a DjangoGetter.
        value = data._obj if isinstance(data, DjangoGetter) else data
        if isinstance(value, dict | BodyIn):
            return data
        raise ValueError(f"must be a JSON object, not {_JSON_TYPES.get(type(value), type(value).__name__)}")


def validation_message(error: Mapping[str, Any]) -> str:
    """One of pydantic's errors as a caller reads it (the API and MCP put the field's name before it)."""
    if error.get("type") == "extra_forbidden":
        return "unknown field: not one this request takes (a typo? the schema lists them)"
    return str(error.get("msg", "invalid"))


QUERY_MAX_CHARS = 2000


def _within_published_length(value: object) -> object:
    # Checked before trimming: the schema's maxLength is about what the client sends, and an
    # over-long text that trimming would shorten was accepted though clients are told it is refused.
    if isinstance(value, str) and len(value) > QUERY_MAX_CHARS:
        raise PydanticCustomError(
            "string_too_long",
            "String should have at most {max_length} characters",
            {"max_length": QUERY_MAX_CHARS},
        )
    return value


# Every free-text field of a request: trimmed, never empty or only spaces, no NUL or control characters.
Query = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=QUERY_MAX_CHARS),
    BeforeValidator(_within_published_length),
    AfterValidator(_no_control_characters),
]

_NARROW = (
    "Optional: narrow the caller's scope (from its API key or account) to this {}; "
    "asking for one it may not see is refused (403)."
)


class ScopeIn(BodyIn):
    """Identity comes from the credentials; these fields can only narrow it."""

    bot_id: str | None = Field(None, pattern=f"^(?:{SCOPE_NAME})?$", description=_NARROW.format("bot"))
    client_id: str | None = Field(None, pattern=f"^(?:{SCOPE_NAME})?$", description=_NARROW.format("client"))
    channels: list[Annotated[str, StringConstraints(pattern=f"^{SCOPE_NAME}$")]] | None = Field(
        None,
        max_length=50,
        description=_NARROW.format("list of channels") + " [] = ungated sources only.",
    )


class SearchIn(ScopeIn):
    query: Query = Field(
        ...,
        description="What to look for (1-2000 characters): plain words, or the query language (docs/api.md): "
        '"exact text", sym:NAME, re:PATTERN, file:GLOB, lang:NAME, kind:KIND, root:NAME, -word.',
    )
    k: int = Field(_LIMITS.default_k, ge=1, le=_LIMITS.max_k, description="How many hits to return.")
    mode: Literal["hybrid", "lexical", "vector"] = Field("hybrid", description="Which channels to use.")
    mmr: Flag = Field(
        False, description="Re-order the fused pool by Maximal Marginal Relevance (fewer near-duplicates)."
    )
    mmr_lambda: float | None = Field(None, ge=0.0, le=1.0, description="MMR trade-off; default RAG_MMR_LAMBDA (0.7).")
    rerank: Flag | None = Field(
        None, description="Rerank the fused hits with the cross-encoder (RAG_RERANK_MODEL); default RAG_RERANK_ENABLED."
    )
    group: Grouping = Field(
        False,
        description='true: at most one hit (the best chunk) per source: per skill, file or tool. "file": the same, '
        "each hit with up to two more of its file's (or skill's) matching chunks in `snippets`; k counts files.",
    )
    sources: list[SearchKind] = Field(
        default_factory=list,
        description="Kinds of source to search; empty = all (document: uploaded documents; memory: what bots "
        "remembered). A kind: in the query narrows within these; none in common is refused (422).",
    )


class ChannelOut(Schema):
    rank: int
    score: float


class SnippetOut(Schema):
    """One more matching chunk of a grouped hit's file: where it is and its text."""

    chunk_id: int
    citation: str
    start_line: int
    end_line: int
    heading_path: str
    symbol: str
    content: str
    score: float = Field(..., description="Its fused score (the hit's order is its best chunk's).")


class HitOut(Schema):
    chunk_id: int
    source: str = Field(..., description="Kind of source: skill, file, tool, document or memory.")
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
    contextual_description: str = Field(
        "",
        description="With contextual retrieval on: the sentence or two that situate "
        "the chunk in its document (embedded and indexed with it).",
    )
    rank: int = Field(..., description="Position in this result, from 1.")
    score: float = Field(..., description="The score the hits are ordered by: rerank score when reranked, else fused.")
    channels: dict[str, ChannelOut] = Field(
        ..., description="Rank and score in each channel that found the chunk (lexical: BM25; vector: cosine)."
    )
    fused: ChannelOut | None = Field(None, description="Rank and score after fusion (hybrid mode).")
    rerank: ChannelOut | None = Field(
        None, description="Rank and score (0 to 1) from the reranker (cross-encoder or language model), when it ran."
    )
    tool: dict | None = Field(None, description="For tool hits: the full schema in OpenAI function format.")
    commit: str = Field("", description="Git roots: the commit the chunk was indexed at.")
    permalink: str = Field("", description="Git roots with a permalink template: a link to these lines at that commit.")
    vector_pending: bool = Field(
        False,
        description="The chunk was written words first and waits for its vector (its root is being embedded): "
        "found and ranked by its words alone, or by the vector of the text it replaced.",
    )
    snippets: list[SnippetOut] = Field(
        default_factory=list, description='With group "file": the file\'s next best matching chunks, best first.'
    )


class SearchOut(Schema):
    query: str
    mode: str
    k: int
    form: Literal["search", "symbol", "grep"] = Field(
        "search",
        description="How the query was answered: search (ranked hits), symbol (sym:NAME: the definitions, in hits) "
        'or grep (re:PATTERN or a lone "exact text": matching lines, in grep; hits empty).',
    )
    hits: list[HitOut]
    grep: "GrepOut | None" = Field(None, description="form grep: the matching lines, as /api/v1/grep answers them.")
    no_good_match: bool = Field(
        False,
        description="No first hit shares a word with the query or is close in meaning "
        "(RAG_SEARCH_GOOD_MATCH_SIMILARITY): the hits are the nearest, not good ones.",
    )
    warnings: list[str] = Field(
        default_factory=list, description="What was skipped and why (a failing model, a skipped rerank)."
    )


class ErrorOut(Schema):
    """Every error's body (kernel.errors.error_body)."""

    error: str = Field(..., description="What went wrong, for people.")
    detail: str = Field(..., description="The same message (where FastAPI's and RFC 9457's clients look).")
    errors: list[str] = Field(
        default_factory=list, description='One "field: problem" per field at fault (a 422 lists each); else empty.'
    )
    data: dict = Field(
        default_factory=dict,
        description="What a client can act on: retry_after_seconds (429), field, current (a 409 on a memory).",
    )


# What any endpoint may answer besides success: 400 a control character in
# the URL, 401 no or bad credentials, 403 a scope or permission the caller
# lacks, 413 a body too large, 422 an invalid field, 429 over the rate limit
# (with Retry-After), 503 the database connection was lost (with
# Retry-After; surfaces.middleware.RetryLostConnection) or, for search, every
# channel failed.
API_ERRORS = {code: ErrorOut for code in (400, 401, 403, 413, 422, 429, 503)}


class ContextK(BodyIn):
    """How many hits of each kind to consider; 0 leaves that kind out."""

    skill: int = Field(default=5, ge=0, le=_LIMITS.max_k, description="Distinct skills in the skill index.")
    file: int = Field(
        default=8,
        ge=0,
        le=_LIMITS.max_k,
        description="File and uploaded-document chunks considered as evidence (before merging).",
    )
    tool: int = Field(default=5, ge=0, le=_LIMITS.max_k, description="Tool schemas returned beside the text.")
    memory: int = Field(
        default=0,
        ge=0,
        le=_LIMITS.max_k,
        description="Memories bots wrote (POST /memories), as evidence cited memory:<id>:1-n; 0 (default): none.",
    )


class ContextIn(ScopeIn):
    query: Query = Field(
        ...,
        description="The task or question the context is for, in words or the query language (docs/api.md): "
        '"exact text", sym:NAME, file:GLOB, lang:NAME, kind:KIND, root:NAME, -word (not re:, which finds lines).',
    )
    budget_tokens: int = Field(
        ...,
        ge=64,
        le=_LIMITS.context_max_budget_tokens,
        description="The most tokens the text may take, counted with RAG_CONTEXT_TOKENIZER (named in the answer).",
    )
    sources: list[Literal["skill", "file", "tool", "memory"]] = Field(
        default_factory=list, description="Kinds to include; empty = all (memories only when k.memory > 0)."
    )
    k: ContextK = Field(default_factory=ContextK)
    include_tools: Flag = Field(
        True, description="Return the tools that fit (in tools, outside the text); false = none."
    )
    format: Literal["markdown", "parts"] = Field(
        "markdown",
        description="markdown: the ready text and its parts; parts: the structured parts only (text empty).",
    )


class ContextPartOut(Schema):
    kind: str = Field(
        ...,
        description="skill (an index entry), file (evidence lines), document (lines of an uploaded document) or "
        "memory (a fact a bot remembered).",
    )
    citation: str = Field(..., description="path:start-end, or skill:<slug>:start-end.")
    score: float
    tokens: int = Field(..., description="Tokens the part's block takes in the text.")
    content: str = Field(..., description="file: the exact lines (compacted ones marked); skill: its index line.")
    title: str = ""
    slug: str = ""
    section: str = Field("", description="Skill: heading path of its best-matching section.")
    why: str = Field("", description="Skill: which query words matched and where each channel ranked it.")
    root: str = Field("", description="File: the workspace root's name (read_range and grep take it).")
    path: str = ""
    start_line: int | None = None
    end_line: int | None = None
    language: str = ""
    symbol: str = ""
    compacted: bool = Field(False, description="Only the head and tail of the lines fit; omitted_lines were left out.")
    omitted_lines: list[int] | None = Field(None, description="[first, last] line left out by compaction.")
    indexed_at: datetime | None = None
    content_hash: str = Field("", description="Hash of the file (or skill) content that was indexed.")
    stale: bool = Field(
        False,
        description="The file changed on disk since it was indexed (size or mtime), or the skill awaits re-indexing.",
    )
    commit: str = Field("", description="File of a git root: the commit its lines were indexed at.")
    permalink: str = Field("", description="File of a git root with a permalink template: a link to these lines.")


class DroppedOut(Schema):
    kind: str
    citation: str
    score: float
    tokens: int = Field(..., description="Tokens its block would have taken.")
    reason: str


class ContextOut(Schema):
    query: str
    tokenizer: str = Field(..., description="The encoding tokens are counted in (RAG_CONTEXT_TOKENIZER).")
    budget_tokens: int
    tokens_used: int = Field(..., description="Tokens of text (with format=parts: of the text the parts would make).")
    text: str = Field(..., description="Ready to inject: the skill index, then file evidence, best at both ends.")
    parts: list[ContextPartOut] = Field(..., description="The text's blocks in text order.")
    tools: list[dict] = Field(
        ..., description="Tools for the model's tools parameter (OpenAI function format), best first."
    )
    tools_tokens: int = Field(..., description="Tokens of the tools as JSON (not counted in budget_tokens).")
    dropped: list[DroppedOut] = Field(..., description="What did not fit the budget, and why.")
    warnings: list[str] = Field(default_factory=list)


_RANKED_QUERY = (
    'What to look for, in words or the query language (docs/api.md): "exact text", file:GLOB, -word (not re:, '
    "which finds lines)."
)


class SkillSearchIn(ScopeIn):
    query: Query = Field(..., description=_RANKED_QUERY)
    k: int = Field(8, ge=1, le=_LIMITS.max_k, description="How many distinct skills.")


class SkillHitOut(Schema):
    slug: str
    title: str
    score: float
    best_section: str = Field(..., description="Heading path of the skill's best-matching chunk.")
    citation: str


class SkillSearchOut(Schema):
    query: str
    skills: list[SkillHitOut]
    warnings: list[str] = Field(default_factory=list)


class ToolSearchIn(ScopeIn):
    query: Query = Field(..., description=_RANKED_QUERY)
    k: int = Field(10, ge=1, le=_LIMITS.max_k)


class ToolHitOut(Schema):
    key: str
    score: float
    openai_schema: dict = Field(
        ..., description="The tool in OpenAI function format: {type: function, function: {...}}."
    )


class ToolSearchOut(Schema):
    query: str
    tools: list[ToolHitOut]
    warnings: list[str] = Field(default_factory=list)


# read and grep


def _glob_checked(value: str) -> str:
    # Indexed paths are relative and never hold "..", "\" or control
    # characters: a glob with them could only ever match nothing.
    if value.startswith("/") or ".." in value.split("/") or "\\" in value:
        raise ValueError('use a relative, "/"-separated pattern without ".." or "\\", e.g. "*.py" or "docs/**"')
    return _no_control_characters(value)


RootName = Annotated[str, StringConstraints(min_length=1, max_length=200), AfterValidator(_no_control_characters)]


class ReadIn(ScopeIn):
    root: RootName = Field(..., description="The workspace root, by name or numeric id.")
    path: str = Field(..., description='The file inside the root, as search cites it: relative and "/"-separated.')
    start: int = Field(1, ge=1, description="First line to return (from 1).")
    end: int | None = Field(
        None,
        ge=1,
        description=f"Last line to return (inclusive); default and cap: start + RAG_READ_MAX_LINES - 1 "
        f"({_LIMITS.read_max_lines} lines).",
    )


class PageOut(Schema):
    label: str = Field(..., description='As citations name it: "p. 3", "slide 2", "sheet Sales".')
    start_line: int = Field(..., description="Its first line in the extracted text.")
    end_line: int


class ReadOut(Schema):
    root: str = Field(..., description="The root's name.")
    path: str
    start_line: int
    end_line: int = Field(
        ..., description="The last line returned: the request's end, clamped to the caps and the file."
    )
    total_lines: int = Field(..., description="Lines in the file now.")
    content: str = Field(
        ...,
        description='The lines exactly as in the file, joined with "\\n" (no numbering added); for a document '
        "(PDF, Office, CSV, an HTML page), lines of its extracted text, numbered as its chunks cite them.",
    )
    citation: str = Field(
        ..., description='path:start_line-end_line; for a paged document "report.pdf p. 3 (lines 9-12)".'
    )
    pages: list[PageOut] = Field(
        default_factory=list,
        description="A document's pages, slides or sheets that the returned lines fall on, with their line ranges; "
        "empty for a text file.",
    )
    truncated: bool = Field(
        ...,
        description="The answer was cut: the request asked for more lines than RAG_READ_MAX_LINES, or its lines ran "
        "past RAG_READ_MAX_CHARS characters (cut at a whole line; a single longer line is cut at the cap).",
    )
    language: str
    indexed_at: datetime = Field(..., description="When the file was last indexed.")
    indexed_hash: str = Field(
        ..., description="SHA-256 of the file's text when it was indexed (of a document's bytes)."
    )
    stale: bool = Field(
        ...,
        description="The file's size or modification time differ from the indexed copy: search may cite old lines.",
    )


class GrepIn(ScopeIn):
    pattern: Annotated[
        str, StringConstraints(min_length=1, max_length=1000), AfterValidator(_no_control_characters)
    ] = Field(
        ...,
        description="What to find in each line (1-1000 characters): literal text, or an RE2 regex with regex=true.",
    )
    regex: Flag = Field(
        False, description="Read pattern as an RE2 regular expression (no backreferences or lookaround)."
    )
    case_sensitive: Flag = Field(False, description="Match letter case exactly.")
    root: RootName | None = Field(
        None, description="Only this root (name or numeric id); default: every root the caller may see."
    )
    glob: Annotated[str, StringConstraints(min_length=1, max_length=512), AfterValidator(_glob_checked)] | None = Field(
        None,
        description='Only files whose path inside the root matches this fnmatch pattern ("*" crosses "/"), '
        'e.g. "*.py", "docs/**".',
    )
    lang: Annotated[str, StringConstraints(min_length=1, max_length=32, pattern=r"^[a-z0-9+#_-]+$")] | None = Field(
        None,
        description='Only files of this language, as search names them ("python", "markdown", "javascript", "text").',
    )
    max_matches: int = Field(
        min(50, _LIMITS.grep_max_matches),
        ge=1,
        le=_LIMITS.grep_max_matches,
        description="Stop after this many matching lines.",
    )


class GrepMatchOut(Schema):
    root: str
    path: str
    line: int = Field(..., description="Line number, from 1.")
    text: str = Field(..., description="The line, cut at 400 characters.")
    citation: str = Field(..., description='path:line-line; in a paged document "report.pdf p. 3 (lines 9-9)".')
    page: str | None = Field(None, description='The document\'s page, slide or sheet holding the line ("p. 3").')


class GrepOut(Schema):
    pattern: str
    matches: list[GrepMatchOut] = Field(..., description="In file order: root name, then path, then line.")
    files_searched: int = Field(
        ...,
        description="Files whose indexed text the answer covers, in file order (all of files_total less "
        "files_skipped, unless it stopped early).",
    )
    files_total: int = Field(0, description="Indexed files the caller may see, after root, glob and lang.")
    files_skipped: int = Field(
        ...,
        description="Indexed files with no stored text yet (indexed before grep was answered from the index; the "
        "next index job stores it).",
    )
    truncated: bool = Field(..., description="More matches may exist: the search stopped early.")
    stopped: Literal["max matches", "scan limit"] | None = Field(
        None,
        description=(
            'Why the search stopped early: max_matches, or "scan limit" when a pattern the trigram index cannot '
            "narrow (no three letters or digits in a row) was scanned up to RAG_GREP_SCAN_FILES files; null when "
            "every file was searched."
        ),
    )
    message: str = Field("", description='"searched N of M files" and how to narrow, when the scan limit stopped it.')


SearchOut.model_rebuild()  # its grep field is a GrepOut, declared with grep's schemas above


class AnswerIn(ContextIn):
    """A question answered from /context's parts (same scope, budget and order), citing them by number."""

    budget_tokens: int = Field(
        3000,
        ge=64,
        le=_LIMITS.context_max_budget_tokens,
        description="The most tokens the sources given to the model may take (RAG_CONTEXT_TOKENIZER).",
    )
    stream: Flag = Field(
        False,
        description="true: text/event-stream (events sources, delta, error, done; keep-alive comments); "
        "false: one JSON object.",
    )


class AnswerSourceOut(Schema):
    number: int = Field(..., description="What the answer's markers ([1]) name.")
    kind: str
    citation: str
    title: str
    path: str
    start_line: int | None
    end_line: int | None
    content: str
    url: str = Field(..., description="The viewer at the cited lines, for a person ('' when there is none).")


class AnswerCitationOut(Schema):
    number: int
    citation: str
    url: str


class AnswerErrorOut(Schema):
    kind: Literal["not_configured", "empty_retrieval", "breaker_open", "timeout", "model_unavailable", "rejected"]
    message: str


class AnswerOut(Schema):
    """The non-streaming answer: the same content as the stream's events."""

    query: str
    sources: list[AnswerSourceOut] = Field(..., description="The numbered sources (the stream's sources event).")
    answer: str = Field(..., description="The text, with markers that name no source removed.")
    error: AnswerErrorOut | None = Field(
        None, description="Why there is no (whole) answer: the sources are still given."
    )
    citations: list[AnswerCitationOut] = Field(..., description="The sources the answer cites, in order of first use.")
    usage: dict[str, int] = Field(..., description="Token usage as the model reported it.")
    dropped_markers: int = Field(..., description="Citation markers that named no source (removed from the text).")
    uncited_numeric_sentences: list[str] = Field(..., description="Sentences that state a number and cite nothing.")
    warnings: list[str]
