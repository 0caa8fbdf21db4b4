"""The search API's router: each endpoint parses, calls its answer function, returns a schema.

The answers (retrieval/answers.py, retrieval/context.py, retrieval/files.py)
are shared with the MCP server; only HTTP (status codes, headers) is here.
"""

from django.http import HttpResponse
from ninja import Query, Router
from ninja.decorators import decorate_view

from access.auth import READ_AUTH
from retrieval.answers import search_answer, skills_search_answer, tools_search_answer
from retrieval.config import AnswerConfig, ContextConfig, FilesLimits, SearchConfig
from retrieval.context import context_answer
from retrieval.files import read_answer
from retrieval.grep import grep_answer
from retrieval.schemas import (
    API_ERRORS,
    ContextIn,
    ContextOut,
    ErrorOut,
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
)
from surfaces.middleware import read_only

router = Router(tags=["search"], auth=READ_AUTH)
# These POSTs only read: after a lost database connection they are run again (surfaces.middleware.read_only).
ERRORS = API_ERRORS  # its 503 also says that every channel failed


@router.post("/search", response={200: SearchOut, **ERRORS})
@decorate_view(read_only)
def search(request, payload: SearchIn, response: HttpResponse):
    """Hybrid (lexical + vector, fused) search over every indexed chunk the caller may see.

    The Server-Timing header says where the time went (retrieval.search.STAGES).
    """
    answer = search_answer(request.auth, payload, config=AnswerConfig.from_settings())
    response["Server-Timing"] = server_timing(answer.timings)
    return answer.out


@router.post("/skills/search", response={200: SkillSearchOut, **ERRORS})
@decorate_view(read_only)
def skills_search(request, payload: SkillSearchIn):
    """The skill index: the skills that fit a task, each once, with its best-matching section."""
    return skills_search_answer(request.auth, payload, config=SearchConfig.from_settings())


@router.post("/tools/search", response={200: ToolSearchOut, **ERRORS})
@decorate_view(read_only)
def tools_search(request, payload: ToolSearchIn):
    """The tools that fit a task, as OpenAI function schemas ready to hand to a model."""
    return tools_search_answer(request.auth, payload, config=SearchConfig.from_settings())


@router.post("/context", response={200: ContextOut, **ERRORS})
@decorate_view(read_only)
def context(request, payload: ContextIn):
    """LLM-ready context for a task, within ``budget_tokens``: a skill index, then file evidence with citations.

    Files are grouped by path, overlapping chunks merged into one range, the
    best file first and the second best last. What does not fit is compacted
    (head and tail) or dropped, and ``dropped`` says why. Tools come apart, as
    a model's ``tools`` parameter wants them. Each part carries when it was
    indexed and whether its file changed since (``stale``).
    """
    return context_answer(request.auth, payload, config=ContextConfig.from_settings())


@router.get("/read", response={200: ReadOut, 404: ErrorOut, **ERRORS})
def read(request, params: Query[ReadIn]):
    """The current lines ``start``..``end`` of an indexed file, to check a citation (``path:12-40``) before quoting it.

    ``root`` is the root's name or id, ``path`` the file inside it as search
    cites it. At most RAG_READ_MAX_LINES lines, cut at a whole line below
    RAG_READ_MAX_CHARS characters (``truncated`` says the answer was cut,
    ``end_line`` where); ``stale`` says the file changed since it was indexed.
    Only indexed files the caller may see: any other answers 404, as if it
    did not exist. An absolute path, ``..``, ``.``, a backslash or a control
    character is refused (400); a file that is now a symlink, binary, not
    UTF-8 or too large, or a ``start`` past its end, answers 422.
    """
    return read_answer(
        request.auth,
        root=params.root,
        path=params.path,
        start=params.start,
        end=params.end,
        bot_id=params.bot_id,
        client_id=params.client_id,
        channels=params.channels,
        limits=FilesLimits.from_settings(),
    )


@router.post("/grep", response={200: GrepOut, 404: ErrorOut, **ERRORS})
@decorate_view(read_only)
def grep(request, payload: GrepIn):
    """The lines matching ``pattern`` in the indexed files the caller may see, each with its citation (``path:7-7``).

    Literal and case-insensitive by default; ``regex: true`` reads the
    pattern as RE2 (linear time; no backreferences or lookaround: 422).
    ``root`` (name or id; 404 if the caller may not see it), ``glob``
    (``"*.py"``, ``"docs/**"``) and ``lang`` narrow the files. Answered from
    the index over every file (retrieval/grep.py); stops at ``max_matches``,
    or for a pattern the trigram index cannot narrow at RAG_GREP_SCAN_FILES
    files, and says so in ``stopped`` and ``message``.
    """
    return grep_answer(request.auth, payload, limits=FilesLimits.from_settings())


def server_timing(timings: dict[str, float]) -> str:
    """``embed;dur=4.1, lexical;dur=2.3, ...`` (milliseconds), as browsers' developer tools show it."""
    return ", ".join(f"{stage};dur={ms:.2f}" for stage, ms in timings.items())
