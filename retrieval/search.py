"""Hybrid search over chunks: lexical and vector candidates, thresholded,
fused, optionally grouped, reranked and diversified. Every hit explains
where its rank came from."""

import enum
import logging
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from django.conf import settings
from django.db import OperationalError, connection, transaction
from psycopg.errors import QueryCanceled

from rag_site.errors import ApplicationError
from retrieval.admission import search_admitted
from retrieval.channels import Candidate, Scope, vector_candidates, visible_models
from retrieval.choices import FusionMethod
from retrieval.fusion import convex_fuse, rrf_fuse
from retrieval.lexical import lexical_candidates
from retrieval.mmr import mmr_order
from retrieval.rerank import cross_encoder_for, rerank as rerank_head
from sources.embedding import EmbeddingError, embedder_for
from sources.models import Chunk, EmbeddingModel, Source, Tool

log = logging.getLogger(__name__)

# Query embeddings run here while the lexical query runs on the request's
# own database connection (threads would each need their own).
_embedding_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="query-embed")


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
    score: float  # the final order's score: rerank score when reranked, else fused
    channels: dict[str, ChannelScore] = field(default_factory=dict)  # lexical / vector
    fused: ChannelScore | None = None
    rerank: ChannelScore | None = None

    @property
    def title(self) -> str:
        return self.chunk.source.title or self.chunk.source.key

    @property
    def citation(self) -> str:
        return self.chunk.citation


def hits_tools(hits: list[Hit]) -> dict[int, Tool]:
    """The tools behind tool hits, by source id, in one query."""
    ids = {h.chunk.source_id for h in hits if h.chunk.source.kind == Source.Kind.TOOL}
    return {tool.source_id: tool for tool in Tool.objects.filter(source_id__in=ids)} if ids else {}


class Hits(list):
    """The hits, best first; ``warnings``: what was skipped and why; ``timings``: see ``STAGES``."""

    def __init__(self, hits=(), warnings: list[str] | None = None, timings: dict[str, float] | None = None) -> None:
        super().__init__(hits)
        self.warnings = warnings or []
        self.timings = timings or {}


# Where a search's time went, in milliseconds (the API sends them as a
# Server-Timing header; `rag_bench search` reports them). Each is a few
# perf_counter() calls. lexical and vector: their SQL (vector excludes the
# wait for the query embedding); embed: the model call, which runs beside
# the lexical SQL; embed_wait: how long the vector channel still had to wait
# for it; search: the whole of chunks_search. Several models add up.
STAGES = ("embed", "embed_wait", "lexical", "vector", "search")


def chunks_search(
    *, query: str, k: int | None = None, mode: Mode = Mode.HYBRID, scope: Scope = Scope(), mmr: bool = False,
    mmr_lambda: float | None = None, rerank: bool | None = None, group: bool = False,
) -> Hits:
    """The ``k`` best chunks for ``query``, each explaining its ranks.

    Vector matches below their source kind's similarity threshold are dropped
    unless the lexical channel found them too. ``group`` keeps the best chunk
    per source (one hit per skill, tool or file). ``rerank`` (default
    RAG_RERANK_ENABLED) reorders the fused head with the cross-encoder; ``mmr``
    then trades relevance for diversity (``mmr_lambda``, default RAG_MMR_LAMBDA).
    A channel or model that fails is skipped with a warning; the query fails
    only when every channel does.
    """
    started = time.perf_counter()
    query = query.strip()
    if not query:
        raise ApplicationError("the query is empty")
    k = k or settings.RAG_SEARCH_DEFAULT_K
    # The API caps k at RAG_SEARCH_MAX_K; the eval command asks for 100.
    if k < 1:
        raise ApplicationError(f"k must be at least 1, got {k}")
    if mmr_lambda is not None and not 0.0 <= mmr_lambda <= 1.0:
        raise ApplicationError(f"mmr_lambda must be between 0 and 1, got {mmr_lambda}")
    limit = max(settings.RAG_SEARCH_CANDIDATES, k)
    warnings: list[str] = []
    timings: dict[str, float] = {}

    with search_admitted(query):  # a long query waits for one of few slots (retrieval/admission.py)
        channels = _channels(query=query, mode=mode, scope=scope, limit=limit, warnings=warnings, timings=timings)
    channels = _thresholded(channels)
    fusing = len(channels) > 1  # lexical + vector, or several models' vector lists
    if fusing:
        fused = _fuse(channels)
    else:  # one list: its own order and scores
        fused = [(c.chunk_id, c.score) for found in channels.values() for c in found]
    if group:
        fused = _best_per_source(fused)
    pool = fused[:limit]
    order = pool

    reranked: dict[int, float] = {}
    if settings.RAG_RERANK_ENABLED if rerank is None else rerank:
        order, reranked = _rerank(query, pool, warnings)
    if mmr:
        order = _mmr(order, k=k, lambda_=settings.RAG_MMR_LAMBDA if mmr_lambda is None else mmr_lambda)
    top = order[:k]

    explain: dict[str, dict[int, ChannelScore]] = {}
    for name, found in channels.items():
        bucket = explain.setdefault(name.split(":")[0], {})  # each model's list explains itself as "vector"
        for c in found:
            bucket.setdefault(c.chunk_id, ChannelScore(c.rank, c.score))
    fused_rank = {chunk_id: ChannelScore(rank, score) for rank, (chunk_id, score) in enumerate(fused, start=1)} if fusing else {}
    rerank_rank = {chunk_id: ChannelScore(rank, score)
                   for rank, (chunk_id, score) in enumerate(sorted(reranked.items(), key=lambda p: -p[1]), start=1)}
    # Not the vector nor the tsvector: nothing shows them, and parsing them was a fifth of a search's time.
    rows = Chunk.objects.select_related("source").defer("embedding", "search_vector").in_bulk([chunk_id for chunk_id, _ in top])
    _timed_add(timings, "search", time.perf_counter() - started)
    return Hits(
        (Hit(chunk=rows[chunk_id], score=score, fused=fused_rank.get(chunk_id), rerank=rerank_rank.get(chunk_id),
             channels={name: scores[chunk_id] for name, scores in explain.items() if chunk_id in scores})
         for chunk_id, score in top if chunk_id in rows),  # a chunk deleted between the queries is left out
        warnings,
        timings,
    )


def _channels(
    *, query: str, mode: Mode, scope: Scope, limit: int, warnings: list[str], timings: dict[str, float],
) -> dict[str, list[Candidate]]:
    """The candidate lists: lexical, and one vector list per visible model.

    The query is embedded for every model in background threads while the
    lexical query runs. Each list fails alone: it is logged, named in the
    warnings and left out.
    """
    models = visible_models(scope=scope) if mode in (Mode.HYBRID, Mode.VECTOR) else []
    embeddings = {model.pk: _embedding_pool.submit(_embed, model, query) for model in models}
    lists: dict[str, list[Candidate]] = {}
    failures: list[str] = []
    if mode in (Mode.HYBRID, Mode.LEXICAL):
        _collect(lists, "lexical", lambda: _timed(timings, "lexical", lexical_candidates, query=query, scope=scope, limit=limit,
                                                   warnings=warnings),
                 failures)

    def vector_list(model: EmbeddingModel) -> list[Candidate]:
        vector, seconds = _timed(timings, "embed_wait", embeddings[model.pk].result)
        _timed_add(timings, "embed", seconds)
        return _timed(timings, "vector", vector_candidates, vector=vector, model=model, scope=scope, limit=limit)

    for model in models:
        _collect(lists, f"vector:{model.pk}", lambda model=model: vector_list(model), failures)
    warnings.extend(failures)
    if failures and not lists:
        # Every list failed (a model that would not load, SQL cancelled by the
        # statement timeout, a database error): the service cannot answer now,
        # and the details say why. Never a 500: the caller sent nothing wrong.
        raise ApplicationError(f"search failed: {failures[0]}", status=503, details=failures)
    return lists


def _embed(model: EmbeddingModel, query: str):
    """The query's vector and the seconds the model took (the pool thread times it; the caller records it).

    Repeated queries (a bot asking again, a page refreshed, typing back) come
    from the per-process cache and take no model time.
    """
    key = (model.provider, model.name, query)
    vector = _query_vectors.get(key)
    if vector is not None:
        return vector, 0.0
    embedder = embedder_for(provider=model.provider, name=model.name, device=settings.RAG_EMBEDDING_DEVICE)
    started = time.perf_counter()
    vector = embedder.embed([query])[0]
    vector.setflags(write=False)  # shared by every request that asks the same
    _query_vectors.put(key, vector, size=settings.RAG_QUERY_EMBEDDING_CACHE)
    return vector, time.perf_counter() - started


class _LruCache:
    """A small thread-safe least-recently-used map (web threads share it)."""

    def __init__(self) -> None:
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key, value, *, size: int) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > size:
                self._items.popitem(last=False)


_query_vectors = _LruCache()


def _timed(timings: dict[str, float], stage: str, run, *args, **kwargs):
    started = time.perf_counter()
    try:
        return run(*args, **kwargs)
    finally:
        _timed_add(timings, stage, time.perf_counter() - started)


def _timed_add(timings: dict[str, float], stage: str, seconds: float) -> None:
    timings[stage] = timings.get(stage, 0.0) + seconds * 1000.0


def _collect(lists: dict[str, list[Candidate]], name: str, run, failures: list[str]) -> None:
    try:
        # A savepoint: a failed query must not poison the caller's transaction.
        # Its statements are bounded: a channel that takes too long is
        # cancelled by PostgreSQL and skipped like any failing channel.
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('statement_timeout'), set_config('statement_timeout', %s, true)",
                           [f"{settings.RAG_SEARCH_STATEMENT_TIMEOUT_MS}ms"])
            previous = cursor.fetchone()[0]
            lists[name] = run()
            cursor.execute("SELECT set_config('statement_timeout', %s, true)", [previous])
    except EmbeddingError as exc:
        log.warning("search skipped %s: %s", name, exc)
        failures.append(f"{name} skipped: {exc}")
    except OperationalError as exc:
        if isinstance(exc.__cause__, QueryCanceled):
            log.warning("search channel %s timed out", name)
            failures.append(f"{name} skipped: it took longer than RAG_SEARCH_STATEMENT_TIMEOUT_MS "
                            f"({settings.RAG_SEARCH_STATEMENT_TIMEOUT_MS} ms)")
        else:
            log.exception("search channel %s failed", name)
            failures.append(f"{name} skipped: {exc}")
    except Exception as exc:  # noqa: BLE001 - one broken channel must not fail the query
        log.exception("search channel %s failed", name)
        failures.append(f"{name} skipped: {exc}")


def _thresholded(channels: dict[str, list[Candidate]]) -> dict[str, list[Candidate]]:
    """Vector matches below their threshold, unless lexical found them too (keyword relevance rescues them)."""
    lexical = {c.chunk_id for c in channels.get("lexical", [])}
    kept = {}
    for name, found in channels.items():
        if name.startswith("vector"):
            found = [c for c in found if c.score >= c.threshold or c.chunk_id in lexical]
            found = [Candidate(c.chunk_id, rank, c.score, c.threshold) for rank, c in enumerate(found, start=1)]
        kept[name] = found
    return kept


def _fuse(channels: dict[str, list[Candidate]]) -> list[tuple[int, float]]:
    weights = {"lexical": settings.RAG_FUSION_LEXICAL_WEIGHT, "vector": 1.0}
    if settings.RAG_FUSION in (FusionMethod.CONVEX, FusionMethod.MINMAX):
        scored = {name: [(c.chunk_id, c.score) for c in found] for name, found in channels.items()}
        return convex_fuse(scored, weights=weights, minmax=settings.RAG_FUSION == FusionMethod.MINMAX)
    return rrf_fuse({name: [c.chunk_id for c in found] for name, found in channels.items()}, k=settings.RAG_RRF_K, weights=weights)


def _best_per_source(fused: list[tuple[int, float]]) -> list[tuple[int, float]]:
    # A root's segment is one source of many files: its files group apart.
    sources = {pk: (source_id, path) for pk, source_id, path in
               Chunk.objects.filter(pk__in=[chunk_id for chunk_id, _ in fused]).values_list("pk", "source_id", "path")}
    seen: set[tuple[int, str]] = set()
    best = []
    for chunk_id, score in fused:
        source = sources.get(chunk_id)
        if source is not None and source not in seen:
            seen.add(source)
            best.append((chunk_id, score))
    return best


def _rerank(query: str, pool: list[tuple[int, float]], warnings: list[str]) -> tuple[list[tuple[int, float]], dict[int, float]]:
    """The pool's first RAG_RERANK_MAX_CHUNKS in cross-encoder order, or the fused order with a warning.

    As in the seeds, reranked results are capped there: the cap bounds the
    model's cost, and unscored chunks would have no comparable score.
    """
    name = settings.RAG_RERANK_MODEL
    texts = dict(Chunk.objects.filter(pk__in=[chunk_id for chunk_id, _ in pool]).values_list("pk", "content"))
    result = rerank_head(
        query, [(chunk_id, texts.get(chunk_id, "")) for chunk_id, _ in pool],
        scorer=cross_encoder_for(name, device=settings.RAG_EMBEDDING_DEVICE) if name else None,
        max_chunks=settings.RAG_RERANK_MAX_CHUNKS, min_chars=settings.RAG_RERANK_MIN_CHARS,
        score_threshold=settings.RAG_RERANK_SCORE_THRESHOLD,
    )
    if result.skipped:
        warnings.append(f"rerank skipped: {result.skipped}")
        return pool, {}
    return result.order, result.scores


def _mmr(pool: list[tuple[int, float]], *, k: int, lambda_: float) -> list[tuple[int, float]]:
    # One query for the pool's vectors; MMR itself is a pure function.
    vectors = dict(Chunk.objects.filter(pk__in=[chunk_id for chunk_id, _ in pool]).values_list("pk", "embedding"))
    return mmr_order(pool, {pk: v for pk, v in vectors.items() if v is not None}, lambda_=lambda_, k=k)
