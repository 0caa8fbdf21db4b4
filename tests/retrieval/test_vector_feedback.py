"""Pseudo-relevance feedback in the vector channel (issue 29): a question over prose is searched again with its
vector moved toward its first hits, in the same SQL statement; code is searched as before.

On synthetic 8-dimensional vectors the second scan's order is checked against its definition, computed in numpy.
"""

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from access.scope import Scope
from retrieval.vector import vector_candidates
from retrieval.vector_feedback import FEEDBACK
from sources.ingest import embedding_model_index_ensure
from sources.models import Chunk, EmbeddingModel, Source

pytestmark = pytest.mark.django_db

DIMS = 8
LIMIT = 20


def unit(vector: np.ndarray) -> np.ndarray:
    return vector / np.linalg.norm(vector)


def corpus(*, language: str, suffix: str, count: int = 60) -> tuple[EmbeddingModel, np.ndarray, np.ndarray]:
    """``count`` chunks scattered around the query, of one language; the model, the query and the stored vectors."""
    model = EmbeddingModel.objects.create(provider="local", name=f"synthetic-{language}", dimensions=DIMS)
    embedding_model_index_ensure(model=model, ef_construction=64)
    source = Source.objects.create(key=f"root:1:{language}", kind=Source.Kind.FILE, embedding_model=model)
    rng = np.random.default_rng(11)
    query = unit(np.ones(DIMS))
    # Hits in two directions: feedback pulls the query toward the denser one.
    centres = [unit(query + rng.normal(0, 0.6, DIMS)) for _ in range(2)]
    vectors = np.array([unit(centres[i % 3 == 0] + rng.normal(0, 0.5, DIMS)) for i in range(count)], dtype=np.float32)
    Chunk.objects.bulk_create(
        Chunk(
            source=source,
            path=f"doc/{i}{suffix}",
            chunk_index=0,
            content=f"chunk {i}",
            start_line=1,
            end_line=1,
            content_hash="x",
            chunking_version="2",
            embedding_model=model,
            language=language,
            embedding=vectors[i].tolist(),
        )
        for i in range(count)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE sources_chunk")
    return model, query, np.array(list(Chunk.objects.order_by("pk").values_list("embedding", flat=True)))


def cosines(vectors: np.ndarray, target: np.ndarray) -> np.ndarray:
    # halfvec, as the index compares them.
    half = vectors.astype(np.float16).astype(np.float64)
    target = target.astype(np.float16).astype(np.float64)
    return half @ target / (np.linalg.norm(half, axis=1) * np.linalg.norm(target))


def cosine_order(vectors: np.ndarray, target: np.ndarray) -> list[int]:
    return list(np.argsort(-cosines(vectors, target), kind="stable"))


def ids(found) -> list[int]:
    first = Chunk.objects.order_by("pk").values_list("pk", flat=True).first()
    return [c.chunk_id - first for c in found]


def test_a_question_over_prose_is_searched_again_toward_its_first_hits():
    model, query, vectors = corpus(language="text", suffix=".txt")
    plain = vector_candidates(vector=query, model=model, scope=Scope(), limit=LIMIT)
    found = vector_candidates(vector=query, model=model, scope=Scope(), limit=LIMIT, feedback=FEEDBACK)
    first = cosine_order(vectors, query)[: FEEDBACK.k]
    target = query / FEEDBACK.beta + vectors[first].mean(axis=0)
    assert ids(plain) == cosine_order(vectors, query)[:LIMIT]
    assert ids(found) == cosine_order(vectors, target)[:LIMIT]
    assert ids(found) != ids(plain)


def test_feedback_ranks_and_fuses_by_the_moved_vector_but_reports_closeness_to_the_query():
    """Thresholds, "no good match" and the context read ``score``: a gibberish query's moved vector sits among its
    hits, so its cosines to them say nothing about the query."""
    model, query, vectors = corpus(language="text", suffix=".txt")
    found = vector_candidates(vector=query, model=model, scope=Scope(), limit=LIMIT, feedback=FEEDBACK)
    first = cosine_order(vectors, query)[: FEEDBACK.k]
    target = query / FEEDBACK.beta + vectors[first].mean(axis=0)
    at = ids(found)
    assert [c.score for c in found] == pytest.approx(list(cosines(vectors, query)[at]), abs=1e-3)
    assert [c.fused_score for c in found] == pytest.approx(list(cosines(vectors, target)[at]), abs=1e-3)


def test_the_lexical_channels_first_hits_join_the_feedback_of_a_question_over_prose():
    model, query, vectors = corpus(language="text", suffix=".txt")
    first_pk = Chunk.objects.order_by("pk").values_list("pk", flat=True).first()
    # The lexical channel's first hits, best first: the chunks furthest from the query, so that they move it most.
    lexical = cosine_order(vectors, query)[::-1][: FEEDBACK.lexical + 2]
    found = vector_candidates(
        vector=query,
        model=model,
        scope=Scope(),
        limit=LIMIT,
        feedback=FEEDBACK,
        lexical_ids=tuple(first_pk + int(i) for i in lexical),
    )
    unsteered = vector_candidates(vector=query, model=model, scope=Scope(), limit=LIMIT, feedback=FEEDBACK)
    first = cosine_order(vectors, query)[: FEEDBACK.k]
    target = (
        query / FEEDBACK.beta
        + vectors[first].mean(axis=0)
        + FEEDBACK.lexical_weight * vectors[lexical[: FEEDBACK.lexical]].mean(axis=0)
    )
    assert ids(found) == cosine_order(vectors, target)[:LIMIT]
    assert ids(found) != ids(unsteered)
    at = ids(found)
    assert [c.score for c in found] == pytest.approx(list(cosines(vectors, query)[at]), abs=1e-3)


def test_lexical_hits_the_model_does_not_hold_change_nothing():
    model, query, _ = corpus(language="text", suffix=".txt")
    unsteered = vector_candidates(vector=query, model=model, scope=Scope(), limit=LIMIT, feedback=FEEDBACK)
    found = vector_candidates(
        vector=query, model=model, scope=Scope(), limit=LIMIT, feedback=FEEDBACK, lexical_ids=(2**31 - 1,)
    )
    assert [(c.chunk_id, c.fused_score) for c in found] == [(c.chunk_id, c.fused_score) for c in unsteered]


def test_code_hits_are_not_moved_by_lexical_hits_either():
    model, query, vectors = corpus(language="python", suffix=".py")
    first_pk = Chunk.objects.order_by("pk").values_list("pk", flat=True).first()
    lexical = tuple(first_pk + int(i) for i in cosine_order(vectors, query)[::-1][:5])
    plain = vector_candidates(vector=query, model=model, scope=Scope(), limit=LIMIT)
    found = vector_candidates(
        vector=query, model=model, scope=Scope(), limit=LIMIT, feedback=FEEDBACK, lexical_ids=lexical
    )
    assert [(c.chunk_id, c.rank, c.score, c.fused_score, c.fusion_score) for c in found] == [
        (c.chunk_id, c.rank, c.score, c.fused_score, c.fusion_score) for c in plain
    ]


def test_code_hits_are_not_moved():
    model, query, _ = corpus(language="python", suffix=".py")
    plain = vector_candidates(vector=query, model=model, scope=Scope(), limit=LIMIT)
    found = vector_candidates(vector=query, model=model, scope=Scope(), limit=LIMIT, feedback=FEEDBACK)
    assert [(c.chunk_id, c.rank, c.score, c.fused_score) for c in found] == [
        (c.chunk_id, c.rank, c.score, c.fused_score) for c in plain
    ]


def test_the_feedback_stays_inside_the_scope():
    model, query, _ = corpus(language="markdown", suffix=".md")
    nothing = Scope(source_ids=(2**31 - 1,))
    assert vector_candidates(vector=query, model=model, scope=nothing, limit=LIMIT, feedback=FEEDBACK) == []


def test_both_scans_go_through_the_hnsw_index():
    model, query, _ = corpus(language="text", suffix=".txt")
    with CaptureQueriesContext(connection) as captured:
        vector_candidates(vector=query, model=model, scope=Scope(), limit=LIMIT, feedback=FEEDBACK)
    (sql,) = [query["sql"] for query in captured.captured_queries if "<=>" in query["sql"]]
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off")
        cursor.execute(f"EXPLAIN {sql}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert plan.count(f"Index Scan using {model.hnsw_index_name}") == 2, plan
