"""The MCP server: tools over the same answer functions as the HTTP API (all read, but remember and forget).

Each tool validates its arguments with the schema its API endpoint validates
with (``SearchIn`` for ``search``, ...), calls the endpoint's answer function
(so scope, limits and errors are the API's: one rule, ``scope_for``) and
returns the endpoint's answer as ``structuredContent`` plus a text block.

Why the SDK's low-level ``Server`` and not ``MCPServer``: MCPServer builds a
tool's input schema from a Python function's signature and validates against
that; here the schema must be exactly the pydantic model the API uses, with
its limits and descriptions, and every refusal (invalid arguments, 403, 404,
503) must come back as a tool error result a model can read and correct.
``Server`` (public: ``mcp.server.Server``) takes each tool's ``inputSchema``
and ``outputSchema`` as given and hands ``tools/call`` to one handler, which
does exactly that. The HTTP side is surfaces/mcp_transport.py.

Identity: the view authenticates the API key and sets ``CALLER`` for the
request; tools read it there, never from their arguments (which, as in the
API, can only narrow the caller's scope).
"""

import functools
import importlib.metadata
import json
import logging
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from asgiref.sync import sync_to_async
from mcp import MCPError, types
from mcp.server import Server, ServerRequestContext
from ninja import Field, Schema
from pydantic import BaseModel, ValidationError

from access.identity import Identity
from kernel.errors import ApplicationError, application_error_body, connection_lost, error_body, http_status
from kernel.words import counted
from retrieval.answers import search_answer, skills_search_answer, tools_search_answer
from retrieval.config import AnswerConfig, ContextConfig, FilesLimits, SearchConfig
from retrieval.context import context_answer
from retrieval.files import read_answer
from retrieval.grep import grep_answer
from retrieval.memories import memories_recall, memory_forget, memory_remember
from retrieval.memory_schemas import ForgetIn, ForgetOut, MemoryIn, MemoryOut, RecallIn, RecallOut
from retrieval.schemas import (
    ContextIn,
    ContextOut,
    GrepIn,
    GrepOut,
    ReadIn,
    ReadOut,
    SearchIn,
    SearchOut,
    SkillSearchIn,
    SkillSearchOut,
    ToolSearchIn,
    ToolSearchOut,
    validation_message,
)
from sources.config import memory_approval_required
from surfaces.schemas import SkillDetailOut
from surfaces.selectors import skill_detail_answer

log = logging.getLogger(__name__)

# Who is calling: set by the view for one request, read by the tools. asgiref
# carries it into the event loop and back into the synchronous services.
CALLER: ContextVar[Identity] = ContextVar("mcp_caller")
# A lost database connection inside a tool, kept for the view (set per request
# like CALLER): the SDK would answer it as a tool error, the view raises it so
# the request is run again on a fresh connection or answered 503
# (surfaces.middleware.RetryLostConnection).
LOST_CONNECTION: ContextVar[list[BaseException]] = ContextVar("mcp_lost_connection")

INSTRUCTIONS = (
    "Retrieval over the skills (procedures written for agents), indexed files (code and docs) and tools this API key "
    "may see. For a task, start with get_context: one token-budgeted text with citations. Use search for pinpoint "
    "hits, search_skills then get_skill to follow a procedure, search_tools for function schemas, grep for exact "
    "strings or symbols. Verify a file citation with read_range before quoting it. Keep a fact learnt in a "
    "conversation with remember, find it later with recall, drop a wrong one with forget."
)


class SkillGetIn(Schema):
    # get_skill's arguments (the HTTP endpoint takes the slug from its path).
    slug: str = Field(
        ...,
        min_length=1,
        max_length=200,
        pattern=r"^[-a-zA-Z0-9_]+$",
        description="The skill's slug, as search_skills, search (skill:<slug>:...) and get_context name it.",
    )


def _compact_json(out: BaseModel) -> str:
    return json.dumps(out.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class McpTool:
    name: str
    title: str
    description: str
    schema_in: type[BaseModel]
    schema_out: type[BaseModel]
    answer: Callable[[Identity, Any], BaseModel]  # synchronous: a Django service
    text: Callable[[Any], str] = _compact_json  # the text content block, for clients that show only text
    read_only: bool = True  # False: it writes (a lost database connection must not run it twice)
    destructive: bool = False  # it deletes what it is given

    def definition(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            title=self.title,
            description=self.description,
            input_schema=schema_for_model(self.schema_in),
            output_schema=schema_for_model(self.schema_out, mode="serialization"),
            annotations=types.ToolAnnotations(
                read_only_hint=self.read_only,
                destructive_hint=None if self.read_only else self.destructive,
                idempotent_hint=None if self.read_only else self.destructive,
                open_world_hint=False,
            ),
        )


def schema_for_model(
    model: type[BaseModel], *, mode: Literal["validation", "serialization"] = "validation"
) -> dict[str, Any]:
    """The model's JSON Schema as a model reads it best: nested models inlined, without pydantic's titles ("Mmr
    Lambda")."""
    schema = model.model_json_schema(mode=mode)
    definitions = schema.pop("$defs", {})
    return _cleaned(schema, definitions, resolving=())


def _cleaned(node: Any, definitions: dict[str, Any], *, resolving: tuple[str, ...], names: bool = False) -> Any:
    # ``names``: a mapping of names to schemas (properties), where "title" may be a field's name.
    if isinstance(node, list):
        return [_cleaned(item, definitions, resolving=resolving) for item in node]
    if not isinstance(node, dict):
        return node
    if names:
        return {name: _cleaned(schema, definitions, resolving=resolving) for name, schema in node.items()}
    reference = node.get("$ref", "")
    name = reference.removeprefix("#/$defs/")
    if name in definitions:
        if name in resolving:
            raise ValueError(f"{name} refers to itself: a tool schema cannot inline it")
        return _cleaned(
            {**definitions[name], **{k: v for k, v in node.items() if k != "$ref"}},
            definitions,
            resolving=(*resolving, name),
        )
    return {
        key: _cleaned(value, definitions, resolving=resolving, names=key in ("properties", "patternProperties"))
        for key, value in node.items()
        if not (key == "title" and isinstance(value, str))
    }


def _read_text(out: ReadOut) -> str:
    notes = [f"root {out.root}", f"{out.total_lines} lines in the file"]
    notes += ["cut at RAG_READ_MAX_LINES or RAG_READ_MAX_CHARS"] if out.truncated else []
    notes += ["changed since indexed: search may cite old lines"] if out.stale else []
    # A document's page markers, beside the lines rather than among them: the lines stay numbered as cited.
    notes += [", ".join(f"{p.label} from line {p.start_line}" for p in out.pages)] if out.pages else []
    return f"{out.citation} ({'; '.join(notes)})\n{out.content}"


def _grep_text(out: GrepOut) -> str:
    # One line per match, the way grep -n prints them, with the citation to pass on.
    lines = [f"[{m.root}] {m.citation}: {m.text}" for m in out.matches]
    # The files its lines are in: files_searched counts every file read, most of them without a match.
    files = len({(m.root, m.path) for m in out.matches})
    summary = f"{counted(len(out.matches), 'matching line')} in {counted(files, 'file')}"
    if out.stopped:
        summary += f"; stopped early ({out.stopped}): there may be more"
    if out.message:
        summary += f"; {out.message}"
    return "\n".join([summary, *lines])


TOOLS: tuple[McpTool, ...] = (
    McpTool(
        name="search",
        title="Search skills, files and tools",
        description=(
            "Hybrid (keyword + semantic) search over everything this API key may see: skills, indexed files and tools. "
            "Returns ranked hits; each has `citation` (path:start-end for a file, skill:<slug>:start-end for a skill), "
            "`content` (the chunk's text as indexed), `score`, and the channels that found it. Use it to locate where "
            "something is defined or explained; for a ready-to-read, token-budgeted text for a task use get_context. "
            "Hits are chunks, not whole files, and files may have changed since indexing: verify a citation with "
            "read_range before quoting it. `sources` limits the kinds, `group: true` gives one hit per file or skill, "
            '`group: "file"` adds each file\'s next best chunks as `snippets` (k then counts files). '
            '`query` takes the query language: "exact text" (must be in the hit; alone: matching lines, in `grep`), '
            "sym:NAME (where a name is defined), re:PATTERN (lines matching an RE2 regex, in `grep`; the rest of the "
            "query), file:GLOB, lang:NAME, kind:KIND, root:NAME, -word (leave out); `form` says which answered."
        ),
        schema_in=SearchIn,
        schema_out=SearchOut,
        answer=lambda identity, payload: search_answer(identity, payload, config=AnswerConfig.from_settings()).out,
    ),
    McpTool(
        name="get_context",
        title="Get context for a task",
        description=(
            "The best first call for a task or question: searches skills, files and tools and assembles one text that "
            "fits `budget_tokens` (counted in the `tokenizer` the answer names). The text lists the relevant skills "
            "(read one with get_skill), then file evidence, each block headed by its citation (path:start-end), best "
            "at the start and the end. `dropped` says what did not fit and why; `tools` are function schemas for your "
            "tools parameter. Quote only what the text shows; to see more lines around a citation, or to check one "
            "before quoting it, use read_range."
        ),
        schema_in=ContextIn,
        schema_out=ContextOut,
        answer=lambda identity, payload: context_answer(identity, payload, config=ContextConfig.from_settings()),
        # format=parts leaves the text empty: then the parts are the answer.
        text=lambda out: out.text or _compact_json(out),
    ),
    McpTool(
        name="search_skills",
        title="Find skills",
        description=(
            "Find the skills (procedures and guides written for agents) that fit a task. Returns each skill once: "
            "its `slug`, `title`, best-matching section and `score`, not its text. Call get_skill with the slug to "
            "read the whole skill before following it."
        ),
        schema_in=SkillSearchIn,
        schema_out=SkillSearchOut,
        answer=lambda identity, payload: skills_search_answer(identity, payload, config=SearchConfig.from_settings()),
    ),
    McpTool(
        name="get_skill",
        title="Read a skill",
        description=(
            "The full markdown of one skill (`body`, front matter included) with its parsed front matter (`metadata`) "
            "and index status. Use it after search_skills, search or get_context named a skill. A skill this key may "
            "not see answers 'does not exist', like a missing one; a skill an admin disabled answers 'is disabled'."
        ),
        schema_in=SkillGetIn,
        schema_out=SkillDetailOut,
        answer=lambda identity, payload: skill_detail_answer(identity, payload.slug),
        text=lambda out: out.body,
    ),
    McpTool(
        name="search_tools",
        title="Find tools",
        description=(
            "Find the tools (function definitions registered with this service) that fit a task. Returns each with a "
            "`score` and `openai_schema`, the definition in OpenAI function format, ready for a model's tools "
            "parameter. It does not run anything."
        ),
        schema_in=ToolSearchIn,
        schema_out=ToolSearchOut,
        answer=lambda identity, payload: tools_search_answer(identity, payload, config=SearchConfig.from_settings()),
    ),
    McpTool(
        name="read_range",
        title="Read lines of a file",
        description=(
            "Lines `start`..`end` of an indexed file exactly as they are on disk now, to verify a citation before "
            "quoting it or to read around a hit. A citation path:12-40 from search, get_context or grep means "
            "`path`, `start` 12, `end` 40; `root` is the root's name, or its id: the number in a file hit's "
            "`source_key` (root:<id>). "
            "At most RAG_READ_MAX_LINES lines and RAG_READ_MAX_CHARS characters (`truncated` says the answer was cut, "
            "`end_line` where); `stale: true` means the file "
            "changed since it was indexed, so search results may cite old lines: trust these. Only indexed files "
            "this key may see; any other answers 'not found'."
        ),
        schema_in=ReadIn,
        schema_out=ReadOut,
        answer=lambda identity, payload: read_answer(
            identity,
            root=payload.root,
            path=payload.path,
            start=payload.start,
            end=payload.end,
            bot_id=payload.bot_id,
            client_id=payload.client_id,
            channels=payload.channels,
            limits=FilesLimits.from_settings(),
        ),
        text=_read_text,
    ),
    McpTool(
        name="grep",
        title="Find exact text in files",
        description=(
            "The lines of the indexed files this key may see that contain `pattern`: literal and case-insensitive by "
            "default, an RE2 regular expression with `regex: true`. Each match has its root, path, line number and "
            "citation (path:7-7). Use it for exact strings, identifiers and error messages, where search (which "
            'ranks by meaning) may miss or blur them; narrow with `root`, `glob` ("*.py", "docs/**") and `lang` '
            '("python"). Every file is searched, from an index; `stopped` says when the answer ended early '
            '(max_matches, or "scan limit" for a pattern without three letters or digits in a row: narrow it).'
        ),
        schema_in=GrepIn,
        schema_out=GrepOut,
        answer=lambda identity, payload: grep_answer(identity, payload, limits=FilesLimits.from_settings()),
        text=_grep_text,
    ),
    McpTool(
        name="remember",
        title="Remember a fact",
        description=(
            "Keep a short fact for later conversations (yours and other bots' of the same scope): a decision, a "
            "changed address, a preference the user stated. One fact per call, in a sentence or a few, written to "
            "make sense without this conversation (say who and what, not 'it'). Add `citation` when it comes from "
            "a source and `conversation_id` to tie it to this conversation; `expires_at` for facts that stop being "
            "true. When a fact replaces one you recalled, pass that memory's id as `supersedes`: the old one is kept "
            "as history and no longer recalled. It is searchable within seconds; `status: pending` means an admin "
            "must approve it first. It is visible to callers of your own scope only."
        ),
        schema_in=MemoryIn,
        schema_out=MemoryOut,
        answer=lambda identity, payload: memory_remember(
            identity, payload, approval_required=memory_approval_required()
        ),
        text=lambda out: f"remembered as memory {out.id} ({out.status}): {out.text}",
        read_only=False,
    ),
    McpTool(
        name="recall",
        title="Recall remembered facts",
        description=(
            "The facts remembered earlier (by you or bots of your scope) that match `query`, best first, each with "
            "its `id`, `text`, when and by whom it was written, and its `citation`. Call it at the start of a task "
            "about something discussed before, and before remembering a fact, to supersede the old one instead of "
            "adding a contradiction. Superseded, expired and unapproved memories are not returned."
        ),
        schema_in=RecallIn,
        schema_out=RecallOut,
        answer=lambda identity, payload: memories_recall(identity, payload, config=SearchConfig.from_settings()),
        text=lambda out: "\n".join(
            [counted(len(out.memories), "memory", "memories")]
            + [f"[memory {m.id}, {m.created_at:%Y-%m-%d}] {m.text}" for m in out.memories]
        ),
    ),
    McpTool(
        name="forget",
        title="Forget a memory",
        description=(
            "Delete a memory that is wrong or no longer wanted, by its `id` (from recall or remember). It is gone for "
            "good, history included; to correct a fact, remember the right one with `supersedes` instead, which keeps "
            "the history. Only memories of your own scope can be forgotten; another's answers 'does not exist'."
        ),
        schema_in=ForgetIn,
        schema_out=ForgetOut,
        answer=lambda identity, payload: memory_forget(identity, payload.id),
        text=lambda out: f"memory {out.id} forgotten",
        read_only=False,
        destructive=True,
    ),
)
_BY_NAME = {tool.name: tool for tool in TOOLS}


def _refused(body: dict[str, Any], *, status: int) -> types.CallToolResult:
    # A tool error, not a protocol error: the model sees why and can correct its call. The API's error shape.
    return types.CallToolResult(
        content=[types.TextContent(text=body["error"])],
        is_error=True,
        structured_content={**body, "status": status},
    )


def _invalid(exc: ValidationError) -> types.CallToolResult:
    messages = [
        f"{'.'.join(map(str, error['loc'])) or 'arguments'}: {validation_message(error)}" for error in exc.errors()
    ]
    return _refused(error_body("invalid arguments: " + "; ".join(messages), errors=messages), status=422)


async def _list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=_definitions())


async def _call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
    tool = _BY_NAME.get(params.name)
    if tool is None:
        # Not a tool error: the spec answers a call to no such tool with a protocol error.
        raise MCPError(
            code=types.INVALID_PARAMS, message=f"unknown tool {params.name!r}; the tools are {', '.join(_BY_NAME)}"
        )
    identity = CALLER.get()  # unset only if the server were served without the view: fail loudly
    try:
        payload = tool.schema_in.model_validate(params.arguments or {})
    except ValidationError as exc:
        return _invalid(exc)
    try:
        out = await sync_to_async(tool.answer, thread_sensitive=True)(identity, payload)
    except ApplicationError as exc:
        return _refused(application_error_body(exc), status=http_status(exc))
    except Exception as exc:
        if connection_lost(exc):
            LOST_CONNECTION.get().append(exc)
            return _refused(error_body("the database connection was lost"), status=503)
        log.exception("MCP tool %s failed", tool.name)
        return _refused(error_body("internal error; the server log has the details"), status=500)
    return types.CallToolResult(
        content=[types.TextContent(text=tool.text(out))], structured_content=out.model_dump(mode="json")
    )


@functools.cache
def _definitions() -> list[types.Tool]:
    return [tool.definition() for tool in TOOLS]


def tool_writes(name: str) -> bool:
    """Whether the tool ``name`` writes (remember, forget): the transport must not run such a request twice."""
    tool = _BY_NAME.get(name)
    return tool is not None and not tool.read_only


def _input_schema(name: str) -> dict[str, Any] | None:
    return next((tool.input_schema for tool in _definitions() if tool.name == name), None)


@functools.cache
def mcp_server() -> Server:
    """The one MCP server of this process (it holds only handlers: each request gets its own session manager)."""
    return Server(
        "rag-site",
        version=importlib.metadata.version("rag-site"),
        title="rag-site retrieval",
        instructions=INSTRUCTIONS,
        on_list_tools=_list_tools,
        on_call_tool=_call_tool,
        get_tool_input_schema=_input_schema,
    )
