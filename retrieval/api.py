from dataclasses import dataclass

from django.http import HttpResponse
from ninja import Query, Router

from retrieval.access import Identity, scope_for
from retrieval.auth import READ_AUTH
from retrieval.context import context_answer
from retrieval.files import grep_answer, read_answer
from retrieval.schemas import (
    API_ERRORS, ContextIn, ContextOut, ErrorOut, HitOut, ScopeIn, SearchIn, SearchOut, SkillHitOut, SkillSearchIn, SkillSearchOut, ToolHitOut, ToolSearchIn, ToolSearchOut,
)
from retrieval.schemas import GrepIn, GrepOut, ReadIn, ReadOut
from retrieval.scope import Scope
from retrieval.search import ChannelScore, Hit, Mode, chunks_search, hits_tools
from sources.models import Skill, Source, Tool

router = Router(tags=["search"], auth=READ_AUTH)
ERRORS = {**API_ERRORS, 503: ErrorOut}  # 503: every channel failed


def payload_scope(identity: Identity, payload: ScopeIn, *, kinds=()) -> Scope:
    """The caller's scope (from its credentials), narrowed by the payload's bot_id, client_id and channels."""
    return scope_for(identity, bot_id=payload.bot_id, client_id=payload.client_id, channels=payload.channels, kinds=kinds)


@dataclass(frozen=True, slots=True)
class SearchAnswer:
    out: SearchOut
    timings: dict[str, float]  # milliseconds per stage, for the Server-Timing header


def search_answer(identity: Identity, payload: SearchIn) -> SearchAnswer:
    """What /search answers (the endpoint and the MCP tool ``search``)."""
    scope = payload_scope(identity, payload, kinds=payload.sources)
    hits = chunks_search(
        query=payload.query, k=payload.k, mode=Mode.parse(payload.mode), scope=scope, mmr=payload.mmr,
        mmr_lambda=payload.mmr_lambda, rerank=payload.rerank, group=payload.group,
    )
    tools = hits_tools(hits)
    out = SearchOut(query=payload.query, mode=payload.mode, k=payload.k, warnings=hits.warnings,
                    hits=[_hit_out(rank, hit, tools) for rank, hit in enumerate(hits, start=1)])
    return SearchAnswer(out=out, timings=hits.timings)


@router.post("/search", response={200: SearchOut, **ERRORS})
def search(request, payload: SearchIn, response: HttpResponse):
    """Hybrid (lexical + vector, fused) search over every indexed chunk the caller may see.

    The Server-Timing header says where the time went (retrieval.search.STAGES).
    """
    answer = search_answer(request.auth, payload)
    response["Server-Timing"] = server_timing(answer.timings)
    return answer.out


def skills_search_answer(identity: Identity, payload: SkillSearchIn) -> SkillSearchOut:
    """What /skills/search answers (the endpoint and the MCP tool ``search_skills``)."""
    scope = payload_scope(identity, payload, kinds=[Source.Kind.SKILL])
    hits = chunks_search(query=payload.query, k=payload.k, scope=scope, group=True)
    slugs = dict(Skill.objects.filter(source_id__in=[h.chunk.source_id for h in hits]).values_list("source_id", "slug"))
    return SkillSearchOut(
        query=payload.query, warnings=hits.warnings,
        skills=[SkillHitOut(slug=slugs[h.chunk.source_id], title=h.title, score=h.score, best_section=h.chunk.context_prefix,
                            citation=h.citation) for h in hits if h.chunk.source_id in slugs],
    )


@router.post("/skills/search", response={200: SkillSearchOut, **ERRORS})
def skills_search(request, payload: SkillSearchIn):
    """The skill index: the skills that fit a task, each once, with its best-matching section."""
    return skills_search_answer(request.auth, payload)


def tools_search_answer(identity: Identity, payload: ToolSearchIn) -> ToolSearchOut:
    """What /tools/search answers (the endpoint and the MCP tool ``search_tools``)."""
    scope = payload_scope(identity, payload, kinds=[Source.Kind.TOOL])
    hits = chunks_search(query=payload.query, k=payload.k, scope=scope, group=True)
    tools = hits_tools(hits)
    return ToolSearchOut(
        query=payload.query, warnings=hits.warnings,
        tools=[ToolHitOut(key=tools[h.chunk.source_id].key, score=h.score, openai_schema=tools[h.chunk.source_id].openai_schema)
               for h in hits if h.chunk.source_id in tools],
    )


@router.post("/tools/search", response={200: ToolSearchOut, **ERRORS})
def tools_search(request, payload: ToolSearchIn):
    """The tools that fit a task, as OpenAI function schemas ready to hand to a model."""
    return tools_search_answer(request.auth, payload)


@router.post("/context", response={200: ContextOut, **ERRORS})
def context(request, payload: ContextIn):
    """LLM-ready context for a task, within ``budget_tokens``: a skill index, then file evidence with citations.

    Files are grouped by path, overlapping chunks merged into one range, the
    best file first and the second best last. What does not fit is compacted
    (head and tail) or dropped, and ``dropped`` says why. Tools come apart, as
    a model's ``tools`` parameter wants them. Each part carries when it was
    indexed and whether its file changed since (``stale``).
    """
    return context_answer(request.auth, payload)


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
    return read_answer(request.auth, root=params.root, path=params.path, start=params.start, end=params.end,
                       bot_id=params.bot_id, client_id=params.client_id, channels=params.channels)


@router.post("/grep", response={200: GrepOut, 404: ErrorOut, **ERRORS})
def grep(request, payload: GrepIn):
    """The lines matching ``pattern`` in the indexed files the caller may see, each with its citation (``path:7-7``).

    Literal and case-insensitive by default; ``regex: true`` reads the
    pattern as RE2 (linear time; no backreferences or lookaround: 422).
    ``root`` (name or id; 404 if the caller may not see it) and ``glob``
    (``"*.py"``, ``"docs/**"``) narrow the files. Stops at ``max_matches`` or
    after RAG_GREP_TIMEOUT_SECONDS, and says so in ``stopped``; files that
    cannot be read now are counted in ``files_skipped``.
    """
    return grep_answer(request.auth, payload)


def server_timing(timings: dict[str, float]) -> str:
    """``embed;dur=4.1, lexical;dur=2.3, ...`` (milliseconds), as browsers' developer tools show it."""
    return ", ".join(f"{stage};dur={ms:.2f}" for stage, ms in timings.items())


def _hit_out(rank: int, hit: Hit, tools: dict[int, Tool]) -> HitOut:
    chunk = hit.chunk
    tool = tools.get(chunk.source_id)
    return HitOut(
        chunk_id=chunk.pk,
        source=chunk.source.kind,
        source_key=chunk.source.key,
        title=hit.title,
        path=chunk.path,
        heading_path=chunk.context_prefix,
        start_line=chunk.start_line,
        end_line=chunk.end_line,
        citation=hit.citation,
        language=chunk.language,
        symbol=chunk.symbol,
        content=chunk.content,
        rank=rank,
        score=hit.score,
        channels={name: _explained(s) for name, s in hit.channels.items()},
        fused=_explained(hit.fused) if hit.fused else None,
        rerank=_explained(hit.rerank) if hit.rerank else None,
        tool=tool.openai_schema if tool else None,
    )


def _explained(score: ChannelScore) -> dict:
    return {"rank": score.rank, "score": score.score}
