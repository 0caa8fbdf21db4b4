"""Hybrid search over chunks, as a pipeline of data: candidate lists from the
channels, thresholded, fused, optionally grouped; the pool's rows loaded once;
optionally reranked and diversified. Every hit explains where its rank came from.

Database round trips: the session's first (settings, models, lexical
statistics), the lexical BM25, one vector query per visible model, the
session's last (settings put back), the pool's rows (with a grouped
search's snippets). In a caller's transaction each channel adds a savepoint.
A grouped search whose full candidate lists held fewer than k files fetches
again with longer lists: those round trips once more.
"""

import enum
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field, replace

from django.db import OperationalError, transaction
from psycopg.errors import QueryCanceled

from access.scope import Scope
from kernel import metrics
from kernel.errors import ApplicationError, Unavailable, connection_lost
from kernel.llm import llm_client, rerank_client
from kernel.replicas import read_connection
from retrieval.admission import search_admitted
from retrieval.candidates import (
    LEXICAL,
    Candidate,
    CandidateList,
    Channel,
    ChannelKind,
    Scored,
    best_per_source,
    fused,
    group_rest,
    thresholded,
)
from retrieval.choices import RerankBackend
from retrieval.code_preference import ASSET_FACTOR, DEFINITION_BONUS, code_preferred
from retrieval.config import SearchConfig
from retrieval.fusion_weights import lexical_weight
from retrieval.lexical import lexical_candidates, lexical_query
from retrieval.mmr import mmr_order
from retrieval.query_shape import QueryShape, asks, query_shape
from retrieval.rerank import cross_encoder_for
from retrieval.rerank import rerank as rerank_head
from retrieval.rerank_api import ApiScorer
from retrieval.rerank_llm import LLMScorer
from retrieval.session import search_session
from retrieval.vector import vector_rows
from retrieval.vector_feedback import feedback_for
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

    @property
    def lexical(self) -> bool:
        return self in (Mode.HYBRID, Mode.LEXICAL)

    @property
    def vector(self) -> bool:
        return self in (Mode.HYBRID, Mode.VECTOR)


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
    # A grouped search's more chunks of the same file (or skill), best first, shown under it (``snippets``).
    snippets: tuple["Hit", ...] = ()

    @property
    def title(self) -> str:
        return self.chunk.source.title or self.chunk.source.key

    @property
    def citation(self) -> str:
        return self.chunk.citation


def hits_tools(hits: Iterable[Hit]) -> dict[int, Tool]:
    """The tools behind tool hits, by source id, in one query."""
    ids = {h.chunk.source_id for h in hits if h.chunk.source.kind == Source.Kind.TOOL}
    tools = Tool.objects.filter(source_id__in=ids) if ids else []
    return {tool.source_id: tool for tool in tools if tool.source_id is not None}


@dataclass(frozen=True, slots=True)
class SearchResult(Sequence):
    """The hits, best first (a result is the sequence of its hits); ``warnings``: what was skipped and why;
    ``timings``: see ``STAGES``."""

    hits: tuple[Hit, ...] = ()
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def __getitem__(self, index):
        return self.hits[index]

    def __len__(self) -> int:
        return len(self.hits)


# Grouped by file, a search that found fewer files than k asks its channels again for this many times more chunks,
# up to the ceiling (the lexical channel's reads are bounded on their own: RAG_LEXICAL_POSTINGS).
GROUP_FETCH_FACTOR = 4
GROUP_FETCH_CEILING = 1000
# A result grouped by file (the page's default, the API's group "file") shows each file's best chunk and up to this
# many more: three places in a file a person scans at a glance, and a card small enough for five on a laptop screen.
FILE_SNIPPETS = 2


# Where a search's time went, in milliseconds (the API sends them as a
# Server-Timing header; `rag_bench search` reports them). Each is a few
# perf_counter() calls. lexical and vector: their SQL (lexical includes the
# session's first round trip, which reads its statistics; vector excludes the
# wait for the query embedding); embed: the model call, which runs beside
# the lexical SQL; embed_wait: how long the vector channel still had to wait
# for it; search: the whole of chunks_search. Several models add up.
STAGES = ("embed", "embed_wait", "lexical", "vector", "search")


def chunks_search(
    *,
    query: str,
    k: int | None = None,
    mode: Mode = Mode.HYBRID,
    scope: Scope = Scope(),
    mmr: bool = False,
    mmr_lambda: float | None = None,
    rerank: bool | None = None,
    group: bool = False,
    snippets: int = 0,
    config: SearchConfig | None = None,
) -> SearchResult:
    """The ``k`` best chunks for ``query``, each explaining its ranks.

    Vector matches below their source kind's similarity threshold are dropped
    unless the lexical channel found them too. ``group`` keeps the best chunk
    per source (one hit per skill, tool or file), and ``k`` then counts those; ``snippets`` (with ``group``) gives
    each hit up to that many more of its file's matching chunks, best first. ``rerank`` (default
    RAG_RERANK_ENABLED) reorders the fused head with the cross-encoder; ``mmr``
    then trades relevance for diversity (``mmr_lambda``, default RAG_MMR_LAMBDA).
    ``config``: the edge builds it (``SearchConfig.from_settings()``); left out,
    it is built here from the builder, for tests and the shell. A channel or model
    that fails is skipped with a warning; the query fails only when every
    channel does.
    """
    started = time.perf_counter()
    config = config or SearchConfig.from_settings()
    query = query.strip()
    k = k or config.default_k
    _check(query=query, k=k, mmr_lambda=mmr_lambda)
    limit = max(config.candidates, k)
    warnings: list[str] = []
    timings: dict[str, float] = {}

    while True:
        attempt: list[str] = []
        # A long query waits for one of few slots (retrieval/admission.py).
        with search_admitted(query, limits=config.admission):
            fetched = _candidate_lists(
                query=query, mode=mode, scope=scope, limit=limit, config=config, warnings=attempt, timings=timings
            )
        lists = thresholded(fetched)
        chunks = _fused(query, lists, mode=mode, config=config)
        order = best_per_source(chunks) if group else chunks
        # Grouped, k counts files: when the chunks fetched held fewer than k and a channel had more to give (its list
        # was full), fetch more, up to the ceiling. A file's many chunks (a long module, a big stylesheet) cannot
        # crowd out the rest.
        if not group or len(order) >= k or limit >= GROUP_FETCH_CEILING or not _full(fetched, limit):
            break
        limit = min(limit * GROUP_FETCH_FACTOR, GROUP_FETCH_CEILING)
    warnings.extend(attempt)
    # The pool reranked and diversified stays its configured size, however many chunks it took to find k files.
    pool = order[: max(config.candidates, k)]
    reranking = config.rerank.enabled if rerank is None else rerank
    heads = pool if reranking or mmr else pool[:k]
    # Each head's snippets are loaded with the pool's rows, in the same query: no round trip of their own.
    rest = group_rest(chunks, [item.chunk_id for item in heads], per_group=snippets) if group and snippets > 0 else {}
    rows = _rows([*heads, *(item for items in rest.values() for item in items)], embeddings=mmr)
    ranked = [(item.chunk_id, item.score) for item in pool]
    reranked: dict[int, float] = {}
    if reranking:
        ranked, reranked = _reranked(query, ranked, rows, config=config, warnings=warnings)
    if mmr:
        ranked = mmr_order(
            ranked, _vectors(ranked, rows), lambda_=config.mmr_lambda if mmr_lambda is None else mmr_lambda, k=k
        )
    hits = _explained(ranked[:k], rows, lists=lists, fused=order if len(lists) > 1 else [], reranked=reranked)
    if group and snippets > 0:
        hits = _with_snippets(hits, rest, rows, fused_order=chunks if len(lists) > 1 else [], lists=lists)
    if waiting := sum(hit.chunk.vector_pending for hit in hits):
        warnings.append(
            f"{waiting} of these hits wait for their vectors (their root is being embedded): ranked by their words"
            if mode.lexical
            else f"{waiting} of these hits wait for their vectors (their root is being embedded): found by the vector "
            "of the text they replaced; chunks with no vector yet are found by words only (mode hybrid or lexical)"
        )
    _timed_add(timings, "search", time.perf_counter() - started)
    metrics.search_observe(mode=mode.value, timings_ms=timings)
    return SearchResult(hits=hits, warnings=warnings, timings=timings)


def _full(lists: list[CandidateList], limit: int) -> bool:
    return any(len(found.candidates) >= limit for found in lists)


def _with_snippets(
    hits: tuple[Hit, ...],
    rest: dict[int, tuple[Scored, ...]],
    rows: dict[int, Chunk],
    *,
    fused_order: list[Scored],
    lists: list[CandidateList],
) -> tuple[Hit, ...]:
    """Each grouped hit with its file's next chunks (``group_rest``), explained like the hits."""
    return tuple(
        replace(
            hit,
            snippets=_explained(
                [(item.chunk_id, item.score) for item in rest.get(hit.chunk.pk, ())],
                rows,
                lists=lists,
                fused=fused_order,
                reranked={},
            ),
        )
        for hit in hits
    )


def _fused(query: str, lists: list[CandidateList], *, mode: Mode, config: SearchConfig) -> list[Scored]:
    """The channels fused; by query (RAG_FUSION_BY_QUERY), the lexical weight chosen from the query's shape and the
    vector channel's confidence, and code's preferences applied (retrieval/fusion_weights.py, code_preference.py)."""
    if not config.by_query or mode != Mode.HYBRID:
        return fused(lists, method=config.fusion, lexical_weight=config.lexical_weight, rrf_k=config.rrf_k)
    shape = query_shape(query)
    vector = [c for found in lists if found.channel.kind == ChannelKind.VECTOR for c in found.candidates]
    steered = (
        config.lexical_feedback
        and any(found.channel == LEXICAL and found.candidates for found in lists)
        and any(c.fusion_score is not None for c in vector)
    )
    asked = shape == QueryShape.QUESTION and asks(query)
    weight = lexical_weight(base=config.lexical_weight, shape=shape, vector=vector, steered=steered, asked=asked)
    order = fused(lists, method=config.fusion, lexical_weight=weight, rrf_k=config.rrf_k)
    return code_preferred(order, query=query, shape=shape, definition=DEFINITION_BONUS, asset=ASSET_FACTOR, asked=asked)


def _check(*, query: str, k: int, mmr_lambda: float | None) -> None:
    if not query:
        raise ApplicationError("the query is empty")
    # The API caps k at RAG_SEARCH_MAX_K; the eval command asks for 100.
    if k < 1:
        raise ApplicationError(f"k must be at least 1, got {k}")
    if mmr_lambda is not None and not 0.0 <= mmr_lambda <= 1.0:
        raise ApplicationError(f"mmr_lambda must be between 0 and 1, got {mmr_lambda}")


def _candidate_lists(
    *,
    query: str,
    mode: Mode,
    scope: Scope,
    limit: int,
    config: SearchConfig,
    warnings: list[str],
    timings: dict[str, float],
) -> list[CandidateList]:
    """The candidate lists: lexical, and one vector list per visible model.

    The query is embedded for every model in background threads while the
    lexical query runs. Each list fails alone: it is logged, named in the
    warnings and left out.
    """
    words = lexical_query(query, config=config.lexical) if mode.lexical else None
    with search_session(scope=scope, lexical_query=words, vector=mode.vector, limit=limit, config=config) as opened:
        embeddings = {
            model.pk: _embedding_pool.submit(
                _embed, model, query, device=config.device, cache_size=config.query_embedding_cache
            )
            for model in opened.models
        }
        lists: list[CandidateList] = []
        failures: list[str] = []
        if mode.lexical:
            _timed_add(timings, "lexical", opened.seconds)
            _collect(
                lists,
                LEXICAL,
                lambda: _timed(
                    timings,
                    "lexical",
                    lexical_candidates,
                    query=query,
                    scope=scope,
                    limit=limit,
                    warnings=warnings,
                    config=config.lexical,
                    collection=opened.collection,
                ),
                failures,
                config=config,
            )

        feedback = feedback_for(query, enabled=config.vector_feedback)
        # The lexical list is in hand before any vector query runs (same connection, one after the other).
        steering = (
            tuple(
                c.chunk_id for found in lists if found.channel == LEXICAL for c in found.candidates[: feedback.lexical]
            )
            if feedback is not None and config.lexical_feedback
            else ()
        )

        def vector_list(model: EmbeddingModel) -> list[Candidate]:
            vector, seconds = _timed(timings, "embed_wait", embeddings[model.pk].result)
            _timed_add(timings, "embed", seconds)
            return _timed(
                timings,
                "vector",
                vector_rows,
                vector=vector,
                model=model,
                scope=scope,
                limit=limit,
                thresholds=config.thresholds,
                feedback=feedback,
                lexical_ids=steering,
            )

        for model in opened.models:
            _collect(
                lists,
                Channel(ChannelKind.VECTOR, model.pk),
                lambda model=model: vector_list(model),
                failures,
                config=config,
            )
    warnings.extend(failures)
    if failures and not lists:
        # Every list failed (a model that would not load, SQL cancelled by the
        # statement timeout, a database error): the service cannot answer now,
        # and the details say why. Never a 500: the caller sent nothing wrong.
        raise Unavailable(f"search failed: {failures[0]}", details={"channels": failures})
    return lists


def _embed(model: EmbeddingModel, query: str, *, device: str, cache_size: int):
    """The query's vector and the seconds the model took (the pool thread times it; the caller records it).

    Repeated queries (a bot asking again, a page refreshed, typing back) come
    from the per-process cache and take no model time.
    """
    key = (model.provider, model.name, query)
    vector = _query_vectors.get(key)
    if vector is not None:
        metrics.QUERY_EMBEDDING_CACHE.labels(result="hit").inc()
        return vector, 0.0
    metrics.QUERY_EMBEDDING_CACHE.labels(result="miss").inc()
    embedder = embedder_for(provider=model.provider, name=model.name, device=device)
    started = time.perf_counter()
    vector = embedder.embed([query], purpose="query")[0]
    vector.setflags(write=False)  # shared by every request that asks the same
    _query_vectors.put(key, vector, size=cache_size)
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


def _collect(lists: list[CandidateList], channel: Channel, run, failures: list[str], *, config: SearchConfig) -> None:
    name = channel.name
    try:
        # In a caller's transaction (a long query's admission, a test), a
        # savepoint: a failed query must not poison it. In autocommit a failed
        # statement leaves nothing behind.
        connection = read_connection()
        with transaction.atomic(using=connection.alias) if connection.in_atomic_block else nullcontext():
            lists.append(CandidateList(channel, tuple(run())))
    except EmbeddingError as exc:
        log.warning("search skipped %s: %s", name, exc)
        metrics.SEARCH_CHANNEL_SKIPPED.labels(channel=channel.kind.value, reason="error").inc()
        failures.append(f"{name} skipped: {exc}")
    except OperationalError as exc:
        if connection_lost(exc):
            # Not this channel's failure: every later query fails too. The request runs again on a fresh
            # connection if it only reads, else answers 503 (surfaces.middleware.RetryLostConnection).
            raise
        if isinstance(exc.__cause__, QueryCanceled):
            log.warning("search channel %s timed out", name)
            metrics.SEARCH_CHANNEL_SKIPPED.labels(channel=channel.kind.value, reason="timeout").inc()
            failures.append(
                f"{name} skipped: it took longer than RAG_SEARCH_STATEMENT_TIMEOUT_MS "
                f"({config.statement_timeout_ms} ms)"
            )
        else:
            log.exception("search channel %s failed", name)
            metrics.SEARCH_CHANNEL_SKIPPED.labels(channel=channel.kind.value, reason="error").inc()
            failures.append(f"{name} skipped: {exc}")
    except Exception as exc:  # noqa: BLE001 - one broken channel must not fail the query
        log.exception("search channel %s failed", name)
        metrics.SEARCH_CHANNEL_SKIPPED.labels(channel=channel.kind.value, reason="error").inc()
        failures.append(f"{name} skipped: {exc}")


def _rows(pool: list[Scored], *, embeddings: bool) -> dict[int, Chunk]:
    """The chunks the later steps and the hits need, with their sources, in one query (a chunk deleted since
    the channels read it is missing)."""
    # The tsvector never, the vector only for MMR: nothing else reads them, and parsing them was a fifth of a search's
    # time.
    deferred = ("search_vector",) if embeddings else ("search_vector", "embedding")
    return (
        Chunk.objects.select_related("source").defer(*deferred).in_bulk([item.chunk_id for item in pool])
        if pool
        else {}
    )


def _reranked(
    query: str,
    ranked: list[tuple[int, float]],
    rows: dict[int, Chunk],
    *,
    config: SearchConfig,
    warnings: list[str],
) -> tuple[list[tuple[int, float]], dict[int, float]]:
    """The first RAG_RERANK_MAX_CHUNKS in cross-encoder order and their scores, or the order as it was with a warning.

    As in the seeds, reranked results are capped there: the cap bounds the
    model's cost, and unscored chunks would have no comparable score.
    """
    result = rerank_head(
        query,
        [(chunk_id, rows[chunk_id].content if chunk_id in rows else "") for chunk_id, _ in ranked],
        scorer=_scorer(config),
        max_chunks=config.rerank.max_chunks,
        min_chars=config.rerank.min_chars,
        score_threshold=config.rerank.score_threshold,
    )
    if result.skipped:
        warnings.append(f"rerank skipped: {result.skipped}")
        return ranked, {}
    return result.order, result.scores


def _scorer(config: SearchConfig):
    """The configured reranker: the cross-encoder, the language model or a rerank service (one bounded try per
    query for either)."""
    rerank = config.rerank
    if rerank.backend == RerankBackend.API:
        api = rerank.api
        return ApiScorer(lambda: rerank_client(api), model=api.model) if api is not None else None
    if rerank.backend == RerankBackend.LLM:
        return LLMScorer(
            lambda: llm_client().with_options(max_retries=0, timeout=rerank.llm_timeout),
            models=rerank.llm_models,
            passage_chars=rerank.llm_passage_chars,
        )
    return cross_encoder_for(rerank.model, device=config.device) if rerank.model else None


def _vectors(ranked: list[tuple[int, float]], rows: dict[int, Chunk]) -> dict:
    return {
        chunk_id: rows[chunk_id].embedding
        for chunk_id, _ in ranked
        if chunk_id in rows and rows[chunk_id].embedding is not None
    }


def _explained(
    top: list[tuple[int, float]],
    rows: dict[int, Chunk],
    *,
    lists: list[CandidateList],
    fused: list[Scored],
    reranked: dict[int, float],
) -> tuple[Hit, ...]:
    """The hits, each with its rank and score in every list that had it, in the fused order and in the reranked one."""
    channels: dict[str, dict[int, ChannelScore]] = {}
    for found in lists:
        scores = channels.setdefault(found.channel.kind.value, {})  # each model's list explains itself as "vector"
        for c in found.candidates:
            scores.setdefault(c.chunk_id, ChannelScore(c.rank, c.score))
    fused_rank = {item.chunk_id: ChannelScore(rank, item.score) for rank, item in enumerate(fused, start=1)}
    rerank_rank = {
        chunk_id: ChannelScore(rank, score)
        for rank, (chunk_id, score) in enumerate(sorted(reranked.items(), key=lambda p: -p[1]), start=1)
    }
    return tuple(
        Hit(
            chunk=rows[chunk_id],
            score=score,
            fused=fused_rank.get(chunk_id),
            rerank=rerank_rank.get(chunk_id),
            channels={name: scores[chunk_id] for name, scores in channels.items() if chunk_id in scores},
        )
        for chunk_id, score in top
        if chunk_id in rows  # a chunk deleted since the channels read it is left out
    )
