from ninja import Router

from retrieval.channels import Scope
from retrieval.schemas import ErrorOut, HitOut, SearchIn, SearchOut, ToolHitOut, ToolSearchIn, ToolSearchOut
from retrieval.search import Hit, Mode, chunks_search
from sources.models import Source, Tool

router = Router(tags=["search"])
ERRORS = {400: ErrorOut, 422: ErrorOut, 503: ErrorOut}


@router.post("/search", response={200: SearchOut, **ERRORS})
def search(request, payload: SearchIn):
    """Hybrid (lexical + vector, fused) search over every indexed chunk the caller may see."""
    scope = Scope(bot_id=payload.bot_id, client_id=payload.client_id, channel=payload.channel, kinds=tuple(payload.sources))
    hits = chunks_search(
        query=payload.query, k=payload.k, mode=Mode.parse(payload.mode), scope=scope, mmr=payload.mmr, mmr_lambda=payload.mmr_lambda
    )
    tools = _tools_for(hits)
    return SearchOut(query=payload.query, mode=payload.mode, k=payload.k, hits=[_hit_out(hit, tools) for hit in hits])


@router.post("/tools/search", response={200: ToolSearchOut, **ERRORS})
def tools_search(request, payload: ToolSearchIn):
    """The tools that fit a task, as OpenAI function schemas ready to hand to a model."""
    scope = Scope(bot_id=payload.bot_id, client_id=payload.client_id, kinds=(Source.Kind.TOOL,))
    hits = chunks_search(query=payload.query, k=payload.k, scope=scope)
    tools = _tools_for(hits)
    return ToolSearchOut(
        query=payload.query,
        tools=[ToolHitOut(key=tools[h.chunk.source_id].key, score=h.score, openai_schema=tools[h.chunk.source_id].openai_schema)
               for h in hits if h.chunk.source_id in tools],
    )


def _tools_for(hits: list[Hit]) -> dict[int, Tool]:
    ids = {h.chunk.source_id for h in hits if h.chunk.source.kind == Source.Kind.TOOL}
    return {tool.source_id: tool for tool in Tool.objects.filter(source_id__in=ids)} if ids else {}


def _hit_out(hit: Hit, tools: dict[int, Tool]) -> HitOut:
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
        score=hit.score,
        channels={name: {"rank": s.rank, "score": s.score} for name, s in hit.channels.items()},
        tool=tool.openai_schema if tool else None,
    )
