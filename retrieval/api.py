from ninja import Router

from retrieval.schemas import ErrorOut, HitOut, SearchIn, SearchOut
from retrieval.search import Hit, Mode, chunks_search

router = Router(tags=["search"])


@router.post("/search", response={200: SearchOut, 400: ErrorOut, 422: ErrorOut, 503: ErrorOut})
def search(request, payload: SearchIn):
    """Hybrid (lexical + vector, fused) search over every indexed chunk."""
    hits = chunks_search(query=payload.query, k=payload.k, mode=Mode.parse(payload.mode))
    return SearchOut(query=payload.query, mode=payload.mode, k=payload.k, hits=[_hit_out(hit) for hit in hits])


def _hit_out(hit: Hit) -> HitOut:
    chunk = hit.chunk
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
    )
