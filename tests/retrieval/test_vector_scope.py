import numpy as np
import pytest
from django.db import connection

from access.scope import Scope
from retrieval.vector import vector_candidates
from sources.ingest import embedding_model_index_ensure
from sources.models import Chunk, EmbeddingModel, Source

pytestmark = pytest.mark.django_db

DIMS = 8


def unit(vector: np.ndarray) -> list[float]:
    return (vector / np.linalg.norm(vector)).tolist()


@pytest.fixture
def crowded(settings):
    """400 chunks of bot-a right around the query, 12 of bot-b further away, through the HNSW index."""
    settings.RAG_HNSW_EF_SEARCH = 10
    model = EmbeddingModel.objects.create(provider="local", name="synthetic-8", dimensions=DIMS)
    embedding_model_index_ensure(model=model, ef_construction=64)
    rng = np.random.default_rng(7)
    query = np.ones(DIMS)
    rows = []
    for bot, count, spread in (("bot-a", 400, 0.05), ("bot-b", 12, 0.8)):
        source = Source.objects.create(key=f"root:1:{bot}", kind=Source.Kind.FILE, bot_id=bot, embedding_model=model)
        rows += [
            Chunk(
                source=source,
                path=f"{bot}/{i}.py",
                chunk_index=0,
                content=f"chunk {i}",
                start_line=1,
                end_line=1,
                content_hash="x",
                chunking_version="2",
                embedding_model=model,
                embedding=unit(query + rng.normal(0, spread, DIMS)),
            )
            for i in range(count)
        ]
    Chunk.objects.bulk_create(rows)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE sources_chunk")
        # A table this small would be scanned and sorted exactly; make the planner use HNSW.
        cursor.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off")
    return model, query


def test_a_filtered_vector_query_still_returns_k_hits_when_k_exist(crowded):
    model, query = crowded
    found = vector_candidates(vector=query, model=model, scope=Scope(bot_ids=("bot-b",)), limit=10)
    bots = set(Source.objects.filter(chunks__id__in=[c.chunk_id for c in found]).values_list("bot_id", flat=True))
    assert len(found) == 10 and bots == {"bot-b"}


def test_the_filtered_query_goes_through_the_hnsw_index(crowded):
    model, _ = crowded
    with connection.cursor() as cursor:
        cursor.execute(
            f"EXPLAIN SELECT id FROM sources_chunk WHERE embedding_model_id = {model.pk} "
            f"ORDER BY embedding::halfvec({DIMS}) <=> %s::halfvec({DIMS}) LIMIT 10",
            [str([1.0] * DIMS)],
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert model.hnsw_index_name in plan
