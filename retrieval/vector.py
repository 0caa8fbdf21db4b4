"""The vector channel: nearest chunks of one embedding model by cosine similarity, through its HNSW index.

The scope filter sits in the query (never applied afterwards), so a chunk
outside the caller's scope cannot leak through. With feedback (retrieval/vector_feedback.py) the same statement
scans twice: its first hits, then the nearest to the query moved toward them.
"""

import math
from collections.abc import Sequence

import numpy as np
from django.db import transaction
from django.db.models import Case, Expression, F, FloatField, Value, When
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast, Coalesce
from pgvector.django import CosineDistance, HalfVectorField

from access.scope import Scope
from kernel.replicas import read_connection
from retrieval.candidates import Candidate
from retrieval.config import SearchConfig, Thresholds
from retrieval.vector_feedback import PROSE_LANGUAGES, Feedback
from sources.models import Chunk, EmbeddingModel, Source


def models_sql(scope: Scope) -> tuple[str, dict]:
    """The embedding models whose vectors ``scope`` can see (one vector query each), as a SELECT of their rows."""
    where, params = scope.source_sql()
    return (
        f"SELECT m.* FROM {EmbeddingModel._meta.db_table} m WHERE m.id IN ("
        f"SELECT s.embedding_model_id FROM {Source._meta.db_table} s WHERE {where})"
    ), params


def hnsw_settings_sql(*, ef_search: str, is_local: str) -> str:
    """set_config calls for the HNSW search (``ef_search``, ``is_local``: SQL expressions). Iterative scans keep
    returning rows when the scope filter removes many of the nearest ones."""
    return (
        f"set_config('hnsw.ef_search', {ef_search}, {is_local}), "
        f"set_config('hnsw.iterative_scan', 'relaxed_order', {is_local})"
    )


# pgvector's upper bound for hnsw.ef_search.
EF_SEARCH_MAX = 1000


def ef_search(*, configured: int, limit: int, chunks: float = 0.0, scale_chunks: int = 0) -> int:
    """hnsw.ef_search for one query: ``configured``, at least the ``limit`` rows asked for (the index returns at
    most ef_search rows per scan pass), times sqrt(chunks / scale_chunks) once the index holds more than
    ``scale_chunks`` (0: never), at most EF_SEARCH_MAX. ``ef_search_sql`` is the same in SQL.

    Why it grows: HNSW's recall at a fixed ef_search falls as the graph grows (the bench's mixtures: 0.86 /
    0.68 / 0.45 at 10k / 100k / 300k, ef_search 100). The square root is a first guess, not yet fitted at 1M
    chunks (docs/benchmarks.md says what was measured); `rag_bench search --ef-sweep` measures the curve.
    """
    floor = max(configured, limit)
    if not scale_chunks or chunks <= scale_chunks:
        return floor
    return max(floor, min(EF_SEARCH_MAX, math.ceil(floor * math.sqrt(chunks / scale_chunks))))


def ef_search_sql(*, floor: str, scale_chunks: int) -> str:
    """``ef_search`` as an SQL expression (text, for set_config): ``floor`` is max(configured, limit) as an SQL
    expression; the chunks are the chunk table's as the planner last counted them (pg_class.reltuples, kept by
    ANALYZE and autovacuum): a catalog read in the statement that sets it, not a round trip of its own."""
    if not scale_chunks:
        return floor
    chunks = f"(SELECT reltuples FROM pg_class WHERE oid = '{Chunk._meta.db_table}'::regclass)"
    return (
        f"CASE WHEN {chunks} > {int(scale_chunks)} THEN greatest(({floor})::int, least({EF_SEARCH_MAX}, "
        f"ceil(({floor})::int * sqrt({chunks} / {int(scale_chunks)}))::int))::text ELSE ({floor})::text END"
    )


def _literal(vector: np.ndarray) -> str:
    # The same literal as ever: halfvec rounds it, and a longer one could round a component the other way.
    return "[" + ",".join(f"{x:.7g}" for x in vector.tolist()) + "]"


def _feedback_target(
    *,
    vector: np.ndarray,
    model: EmbeddingModel,
    scope: Scope,
    feedback: Feedback,
    halfvec: HalfVectorField,
    lexical_ids: Sequence[int],
) -> Expression:
    """The vector the second scan orders by, as a scalar subquery (PostgreSQL runs it once, before the scan, and
    the HNSW index takes its value like a constant): query / beta + the mean of the first ``k`` hits (the same
    direction as query + beta x mean) + ``lexical_weight`` x the mean of the lexical channel's first hits that
    this model embedded, when at least ``prose_share`` of the ``k`` hits are prose; else the query itself.
    The first scan has the same scope, model and index as the second; the lexical hits are read by key."""
    query = Cast(Value(_literal(vector)), halfvec)
    first = (
        Chunk.objects.filter(scope.chunk_filter(), embedding_model_id=model.pk)
        .annotate(feedback_distance=CosineDistance(Cast("embedding", halfvec), query))
        .order_by("feedback_distance")
        .values("embedding", "language")[: feedback.k]
    )
    sql, params = first.query.sql_with_params()
    prose = ", ".join(["%s"] * len(PROSE_LANGUAGES))
    dimensions = int(model.dimensions)
    lexical_sql: str = ""
    lexical_params: tuple = ()
    lexical_ids = tuple(lexical_ids[: feedback.lexical])
    if lexical_ids and feedback.lexical_weight > 0:
        # pgvector multiplies vectors element by element: the weight is a vector of it. No lexical hit under
        # this model (another model's chunks) adds nothing rather than making the sum NULL.
        lexical_sql = (
            f" + coalesce((SELECT avg(embedding) FROM {Chunk._meta.db_table} "
            f"WHERE id = ANY(%s) AND embedding_model_id = %s) * %s::vector, %s::vector)"
        )
        lexical_params = (
            list(lexical_ids),
            model.pk,
            _literal(np.full(dimensions, feedback.lexical_weight)),
            _literal(np.zeros(dimensions)),
        )
    return RawSQL(
        f"(SELECT CASE WHEN avg((first.language IN ({prose}))::int) >= %s "
        f"THEN (avg(first.embedding) + %s::vector{lexical_sql})::halfvec({dimensions}) "
        f"ELSE %s::halfvec({dimensions}) END "
        f"FROM ({sql}) AS first)",
        (
            *PROSE_LANGUAGES,
            feedback.prose_share,
            _literal(vector / feedback.beta),
            *lexical_params,
            _literal(vector),
            *params,
        ),
        output_field=halfvec,
    )


def vector_rows(
    *,
    vector: np.ndarray,
    model: EmbeddingModel,
    scope: Scope,
    limit: int,
    thresholds: Thresholds,
    feedback: Feedback | None = None,
    lexical_ids: Sequence[int] = (),
) -> list[Candidate]:
    """The query, with the HNSW settings already applied (retrieval.session does it once per search); with
    ``feedback``, searched again toward its first hits (and ``lexical_ids``, the lexical channel's, best first)
    in the same statement. Candidates the feedback moved carry their cosine to that vector as ``fusion_score``."""
    halfvec = HalfVectorField(dimensions=int(model.dimensions))
    query = CosineDistance(Cast("embedding", halfvec), Cast(Value(_literal(vector)), halfvec))
    if feedback is None:
        # The cast and the model filter match the model's partial index exactly, so the planner can use it.
        distance = query
    else:
        target = _feedback_target(
            vector=vector, model=model, scope=scope, feedback=feedback, halfvec=halfvec, lexical_ids=lexical_ids
        )
        distance = CosineDistance(Cast("embedding", halfvec), target)
    threshold = Coalesce(
        F("source__similarity_threshold"),
        Case(
            When(source__kind=Source.Kind.SKILL, then=Value(thresholds.skill)),
            When(source__kind=Source.Kind.FILE, then=Value(thresholds.file)),
            When(source__kind=Source.Kind.TOOL, then=Value(thresholds.tool)),
            default=Value(0.0),
        ),
        output_field=FloatField(),
    )
    chunks = Chunk.objects.filter(scope.chunk_filter(), embedding_model_id=model.pk).annotate(
        distance=distance, threshold=threshold
    )
    if feedback is not None:
        chunks = chunks.annotate(query_distance=query)
    columns = ("pk", "distance", "threshold", "source_id", "path", "symbol", "language")
    if feedback is None:
        rows = [(*row, None) for row in chunks.order_by("distance").values_list(*columns)[:limit]]
    else:
        rows = list(chunks.order_by("distance").values_list(*columns, "query_distance")[:limit])
        if all(row[1] == row[-1] for row in rows):
            # The gate kept the query (code hits): the same candidates as without feedback, so fusion can tell.
            rows = [(*row[:-1], None) for row in rows]
    return [
        Candidate(
            chunk_id=pk,
            rank=rank,
            score=1 - (distance if query_distance is None else query_distance),
            source_id=source_id,
            path=path,
            threshold=threshold,
            symbol=symbol,
            language=language,
            fusion_score=None if query_distance is None else 1 - distance,
        )
        for rank, (pk, distance, threshold, source_id, path, symbol, language, query_distance) in enumerate(
            rows, start=1
        )
    ]


def vector_candidates(
    *,
    vector: np.ndarray,
    model: EmbeddingModel,
    scope: Scope,
    limit: int,
    config: SearchConfig | None = None,
    ef: int | None = None,
    feedback: Feedback | None = None,
    lexical_ids: Sequence[int] = (),
) -> list[Candidate]:
    """``vector_rows`` on its own (benchmarks, tests): the HNSW settings for this query only (``ef``: this
    ef_search instead of the service's)."""
    config = config or SearchConfig.from_settings()
    if ef:
        setting = "%(ef)s"
    else:
        setting = ef_search_sql(floor="%(ef)s", scale_chunks=config.hnsw_ef_search_scale_chunks)
    connection = read_connection()
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {hnsw_settings_sql(ef_search=setting, is_local='true')}",
            {"ef": str(ef or max(config.hnsw_ef_search, limit))},
        )
        return vector_rows(
            vector=vector,
            model=model,
            scope=scope,
            limit=limit,
            thresholds=config.thresholds,
            feedback=feedback,
            lexical_ids=lexical_ids,
        )
