"""Hybrid search over chunks: lexical and vector candidates, fused."""

import enum
from dataclasses import dataclass, field

from django.conf import settings

from rag_site.errors import ApplicationError
import logging

from retrieval.channels import Candidate, Scope, vector_candidates, visible_models
from retrieval.choices import FusionMethod
from retrieval.fusion import convex_fuse, rrf_fuse
from retrieval.lexical import lexical_candidates
from retrieval.mmr import mmr_order
from sources.embedding import EmbeddingError, embedder_for
from sources.models import Chunk

log = logging.getLogger(__name__)


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


def chunks_search(
    *, query: str, k: int | None = None, mode: Mode = Mode.HYBRID, scope: Scope = Scope(), mmr: bool = False,
    mmr_lambda: float | None = None,
) -> list[Hit]:
    """The ``k`` best chunks for ``query``, each explaining its channel ranks.

    With ``mmr`` the fused pool is re-ordered by Maximal Marginal Relevance
    (``mmr_lambda``, default RAG_MMR_LAMBDA) so near-duplicates give way.
    """
    query = query.strip()
    if not query:
        raise ApplicationError("the query is empty")
    k = k or settings.RAG_SEARCH_DEFAULT_K
    # The API caps k at RAG_SEARCH_MAX_K; the eval command asks for 100.
    if k < 1:
        raise ApplicationError(f"k must be at least 1, got {k}")
    limit = max(settings.RAG_SEARCH_CANDIDATES, k)

    channels: dict[str, list[Candidate]] = {}
    if mode in (Mode.HYBRID, Mode.LEXICAL):
        channels["lexical"] = lexical_candidates(query=query, scope=scope, limit=limit)
    if mode in (Mode.HYBRID, Mode.VECTOR):
        channels.update(_vector(query=query, scope=scope, limit=limit))

    if mode is Mode.LEXICAL or (mode is Mode.VECTOR and len(channels) == 1):
        found = next(iter(channels.values()), [])
        fused = [(c.chunk_id, c.score) for c in found]
    else:
        fused = _fuse(channels)
    top = _mmr(fused[:limit], k=k, lambda_=settings.RAG_MMR_LAMBDA if mmr_lambda is None else mmr_lambda) if mmr else fused[:k]

    # Each model's list is its own ranking; hits explain it as "vector".
    explain: dict[str, dict[int, ChannelScore]] = {}
    for name, found in channels.items():
        bucket = explain.setdefault(name.split(":")[0], {})
        for c in found:
            bucket.setdefault(c.chunk_id, ChannelScore(c.rank, c.score))
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


def _mmr(pool: list[tuple[int, float]], *, k: int, lambda_: float) -> list[tuple[int, float]]:
    if not 0.0 <= lambda_ <= 1.0:
        raise ApplicationError(f"mmr_lambda must be between 0 and 1, got {lambda_}")
    # One query for the pool's vectors; MMR itself is a pure function.
    vectors = dict(Chunk.objects.filter(pk__in=[chunk_id for chunk_id, _ in pool]).values_list("pk", "embedding"))
    return mmr_order(pool, {pk: v for pk, v in vectors.items() if v is not None}, lambda_=lambda_, k=k)


def _fuse(channels: dict[str, list[Candidate]]) -> list[tuple[int, float]]:
    weights = {"lexical": settings.RAG_FUSION_LEXICAL_WEIGHT, "vector": 1.0}
    if settings.RAG_FUSION in (FusionMethod.CONVEX, FusionMethod.MINMAX):
        scored = {name: [(c.chunk_id, c.score) for c in found] for name, found in channels.items()}
        return convex_fuse(scored, weights=weights, minmax=settings.RAG_FUSION == FusionMethod.MINMAX)
    return rrf_fuse({name: [c.chunk_id for c in found] for name, found in channels.items()}, k=settings.RAG_RRF_K, weights=weights)


def _vector(*, query: str, scope: Scope, limit: int) -> dict[str, list[Candidate]]:
    """One candidate list per model visible to the scope; a model that fails is skipped."""
    lists: dict[str, list[Candidate]] = {}
    failures = []
    models = visible_models(scope=scope)
    for model in models:
        try:
            embedder = embedder_for(provider=model.provider, name=model.name, device=settings.RAG_EMBEDDING_DEVICE)
            vector = embedder.embed([query])[0]
        except EmbeddingError as exc:
            log.warning("vector search skipped model %s: %s", model, exc)
            failures.append(str(exc))
            continue
        lists[f"vector:{model.pk}"] = vector_candidates(vector=vector, model=model, scope=scope, limit=limit)
    if models and len(failures) == len(models):
        raise ApplicationError(f"the query could not be embedded: {failures[0]}", status=503)
    return lists
