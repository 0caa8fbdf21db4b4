"""Hybrid search over chunks: lexical and vector candidates, fused."""

import enum
from dataclasses import dataclass, field

from django.conf import settings

from rag_site.errors import ApplicationError
from retrieval.channels import Candidate, lexical_candidates, vector_candidates
from retrieval.fusion import rrf_fuse
from sources.embedding import EmbeddingError, embedder_for
from sources.models import Chunk, EmbeddingModel


class Mode(enum.StrEnum):
    HYBRID = "hybrid"
    LEXICAL = "lexical"
    VECTOR = "vector"

    @classmethod
    def parse(cls, value: str) -> "Mode":
        try:
            return cls(value)
        except ValueError:
            raise ApplicationError(
                f"unknown search mode {value!r}; valid modes: {', '.join(m.value for m in cls)}"
            ) from None


@dataclass(frozen=True, slots=True)
class ChannelScore:
    rank: int
    score: float


@dataclass(frozen=True, slots=True)
class Hit:
    chunk: Chunk
    score: float
    channels: dict[str, ChannelScore] = field(default_factory=dict)

    @property
    def title(self) -> str:
        return self.chunk.source.title or self.chunk.source.key

    @property
    def citation(self) -> str:
        return self.chunk.citation


def chunks_search(*, query: str, k: int | None = None, mode: Mode = Mode.HYBRID) -> list[Hit]:
    """The ``k`` best chunks for ``query``, each explaining its channel ranks."""
    query = query.strip()
    if not query:
        raise ApplicationError("the query is empty")
    k = k or settings.RAG_SEARCH_DEFAULT_K
    if not 1 <= k <= settings.RAG_SEARCH_MAX_K:
        raise ApplicationError(f"k must be between 1 and {settings.RAG_SEARCH_MAX_K}, got {k}")
    limit = max(settings.RAG_SEARCH_CANDIDATES, k)

    channels: dict[str, list[Candidate]] = {}
    if mode in (Mode.HYBRID, Mode.LEXICAL):
        channels["lexical"] = lexical_candidates(query=query, limit=limit)
    if mode in (Mode.HYBRID, Mode.VECTOR):
        channels["vector"] = _vector(query=query, limit=limit)

    if mode is Mode.HYBRID:
        fused = rrf_fuse({name: [c.chunk_id for c in found] for name, found in channels.items()}, k=settings.RAG_RRF_K)
    else:
        (found,) = channels.values()
        fused = [(c.chunk_id, c.score) for c in found]
    top = fused[:k]

    explain = {name: {c.chunk_id: ChannelScore(c.rank, c.score) for c in found} for name, found in channels.items()}
    rows = Chunk.objects.select_related("source").in_bulk([chunk_id for chunk_id, _ in top])
    return [
        Hit(
            chunk=rows[chunk_id],
            score=score,
            channels={name: scores[chunk_id] for name, scores in explain.items() if chunk_id in scores},
        )
        for chunk_id, score in top
        if chunk_id in rows  # deleted between the two queries
    ]


def _vector(*, query: str, limit: int) -> list[Candidate]:
    model = EmbeddingModel.objects.filter(
        provider="local", name=settings.RAG_EMBEDDING_MODEL
    ).order_by("-pk").first()
    if model is None:
        return []  # nothing has been embedded yet, so nothing to find
    try:
        vector = embedder_for(provider=model.provider, name=model.name, device=settings.RAG_EMBEDDING_DEVICE).embed([query])[0]
    except EmbeddingError as exc:
        raise ApplicationError(f"the query could not be embedded: {exc}", status=503) from exc
    return vector_candidates(vector=vector, model=model, limit=limit)
