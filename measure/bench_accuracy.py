"""How close the fast channels come to exact search, for `rag_bench search`.

- HNSW recall@10: the vector channel's first 10 (as the service asks for
  them: RAG_SEARCH_CANDIDATES rows, RAG_HNSW_EF_SEARCH, iterative scan)
  against the same SQL with index scans off, which sorts every vector in
  scope; a hit at least as similar as the exact 10th counts as found.
- Lexical agreement@10: the lexical channel's first 10 against BM25 computed
  here, in Python, from the chunks' stored vectors alone (not the postings
  index): every chunk in scope holding a query lexeme, with the channel's
  definition (its query lexemes and word cap, field weights, k1, b), and N,
  average length and document frequencies over every chunk in scope,
  counted here. The channel reads each common word's postings to a
  bounded depth (approximate top-k); what that costs in agreement shows here.
"""

import math
from collections import defaultdict

import numpy as np
from django.conf import settings
from django.db import connection, transaction

from access.scope import Scope
from retrieval import lexical
from retrieval.lexical import BM25_B, BM25_K1, FIELD_WEIGHTS, TABLES, lexeme_params, lexical_candidates
from retrieval.vector import vector_candidates
from sources.embedding import embedder_for
from sources.models import EmbeddingModel

K = 10


def hnsw_recall(
    *,
    queries: list[str],
    model: EmbeddingModel,
    scope: Scope,
    vectors: np.ndarray | None = None,
    ef_searches: tuple[int, ...] = (),
) -> dict:
    """Mean, min and count of recall@10 over ``queries`` (or, given, the query ``vectors``) as the service searches;
    with ``ef_searches``, the mean at each of those ef_search values too (``by_ef``)."""
    if vectors is None:
        embedder = embedder_for(provider=model.provider, name=model.name, device=settings.RAG_EMBEDDING_DEVICE)
        vectors = embedder.embed(queries)
    recalls = []
    by_ef: dict[int, list[float]] = {ef: [] for ef in ef_searches}
    limit = settings.RAG_SEARCH_CANDIDATES
    for vector in vectors:
        with transaction.atomic(), connection.cursor() as cursor:
            # HNSW is only ever used by an index scan; without one PostgreSQL sorts every row.
            cursor.execute("SET LOCAL enable_indexscan = off")
            exact = vector_candidates(vector=vector, model=model, scope=scope, limit=K)
        if not exact:
            continue
        # As ann-benchmarks counts it: a hit as near as the exact 10th is right (duplicate
        # chunks have equal vectors, and which of them the exact sort lists is arbitrary).
        tenth = exact[-1].score - 1e-6
        approximate = vector_candidates(vector=vector, model=model, scope=scope, limit=limit)[:K]
        recalls.append(sum(1 for c in approximate if c.score >= tenth) / len(exact))
        for ef in ef_searches:
            found = vector_candidates(vector=vector, model=model, scope=scope, limit=limit, ef=ef)[:K]
            by_ef[ef].append(sum(1 for c in found if c.score >= tenth) / len(exact))
    result = _stats(recalls)
    if ef_searches:
        result["by_ef"] = {str(ef): _stats(values)["mean"] for ef, values in by_ef.items()}
    return result


def lexical_agreement(*, queries: list[str], scope: Scope, by_kind: dict[str, list[str]] | None = None) -> dict:
    """Mean, min and count of the top-10 overlap with exhaustive BM25 (ties at the 10th score count as agreeing).

    With ``by_kind`` (kind: its queries, all of them in ``queries``), also the mean per kind.
    """
    agreements: dict[str, float] = {}
    collection = reference_collection(scope=scope)
    for query in queries:
        if lexical._OPERATORS.search(query):  # phrases and exclusions filter further; the reference knows none
            continue
        reference = bm25_reference(query=query, scope=scope, collection=collection)
        if not reference:  # no indexable word: the channel's substring fallback, not BM25
            continue
        found = [
            c.chunk_id for c in lexical_candidates(query=query, scope=scope, limit=settings.RAG_SEARCH_CANDIDATES)[:K]
        ]
        ranked = sorted(reference.items(), key=lambda item: (-item[1], item[0]))
        tenth = ranked[min(K, len(ranked)) - 1][1]
        best = {chunk_id for chunk_id, score in ranked if score >= tenth - 1e-9 * max(1.0, abs(tenth))}
        agreements[query] = len(set(found) & best) / min(K, len(ranked))
    result = _stats(list(agreements.values()))
    if by_kind:
        result["by_kind"] = {
            kind: _stats([agreements[q] for q in kind_queries if q in agreements])["mean"]
            for kind, kind_queries in by_kind.items()
        }
    return result


_REFERENCE_ROWS = """
    WITH q AS (
        SELECT array_agg(lexeme) AS terms, string_agg(quote_literal(lexeme), ' | ')::tsquery AS query
        FROM ({lexemes}) AS words
    )
    SELECT c.id, length(c.search_vector), u.lexeme, u.weights
    FROM {chunk} c JOIN {source} s ON s.id = c.source_id, q, unnest(c.search_vector) AS u
    WHERE c.search_vector @@ q.query AND {where} AND u.lexeme = ANY(q.terms)
"""

# The visible collection's size (N) and length, from the chunks themselves.
_COLLECTION = """
    SELECT count(*), coalesce(sum(length(c.search_vector)), 0)
    FROM {chunk} c JOIN {source} s ON s.id = c.source_id WHERE {where}
"""


def reference_collection(*, scope: Scope) -> tuple[int, int]:
    """Chunks in scope and their total length: counted once per run (a scan of the scope)."""
    where, params = scope.chunk_sql()
    with connection.cursor() as cursor:
        cursor.execute(_COLLECTION.format(where=where, **TABLES), params)
        return cursor.fetchone()


def bm25_reference(*, query: str, scope: Scope, collection: tuple[int, int] | None = None) -> dict[int, float]:
    """BM25 of every chunk in scope that holds one of the query's lexemes (empty: the query has none)."""
    query = " ".join(query.split()[: settings.RAG_LEXICAL_MAX_WORDS])  # the channel's word cap
    where, params = scope.chunk_sql()
    params.update(lexeme_params(query))
    with connection.cursor() as cursor:
        cursor.execute(_REFERENCE_ROWS.format(lexemes=lexical.QUERY_LEXEMES, where=where, **TABLES), params)
        rows = cursor.fetchall()
    visible, total_length = collection or reference_collection(scope=scope)
    n = visible  # BM25's N: the caller's chunks, as the channel counts it
    lengths: dict[int, int] = {}
    tf: dict[int, dict[str, float]] = defaultdict(dict)
    df: dict[str, int] = defaultdict(int)
    for chunk_id, length, lexeme, weights in rows:
        lengths[chunk_id] = length
        tf[chunk_id][lexeme] = sum(FIELD_WEIGHTS.get(w, 1.0) for w in weights) or 1.0
        df[lexeme] += 1
    if not lengths:
        return {}
    average = total_length / visible
    idf = {lexeme: math.log(1 + (n - count + 0.5) / (count + 0.5)) for lexeme, count in df.items()}
    return {
        chunk_id: sum(
            idf[lexeme] * f * (BM25_K1 + 1) / (f + BM25_K1 * (1 - BM25_B + BM25_B * lengths[chunk_id] / average))
            for lexeme, f in terms.items()
        )
        for chunk_id, terms in tf.items()
    }


def _stats(values: list[float]) -> dict:
    return {
        "mean": round(sum(values) / len(values), 4) if values else None,
        "min": round(min(values), 4) if values else None,
        "queries": len(values),
    }
