"""Issue 30: each model's HNSW index is built with RAG_HNSW_EF_CONSTRUCTION, and an upgrade applies it to old ones."""

import pytest
from django.db import connection

from sources.ingest import embedding_model_index_ensure
from sources.models import EmbeddingModel
from tests.migrating import migrate

BEFORE = [("sources", "0018_memories")]
AFTER = [("sources", "0019_hnsw_ef_construction")]


def index_definition(name: str) -> str | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [name])
        row = cursor.fetchone()
    return row[0] if row else None


@pytest.mark.django_db
def test_a_new_models_index_is_built_with_the_given_ef_construction():
    model = EmbeddingModel.objects.create(provider="local", name="tiny", dimensions=8)
    embedding_model_index_ensure(model=model, ef_construction=48)
    definition = index_definition(model.hnsw_index_name)
    assert definition is not None and "USING hnsw" in definition
    assert "ef_construction='48'" in definition and f"embedding_model_id = {model.pk}" in definition


@pytest.fixture
def latest_schema_after():
    yield
    migrate()


@pytest.mark.django_db(transaction=True)
def test_the_upgrade_sets_the_setting_on_indexes_built_before_it(latest_schema_after, settings):
    settings.RAG_HNSW_EF_CONSTRUCTION = 96
    old = migrate(BEFORE)
    try:
        OldModel = old.get_model("sources", "EmbeddingModel")
        indexed = OldModel.objects.create(provider="local", name="indexed", dimensions=8)
        # A model whose index was never made (or was dropped by hand): nothing to alter, no error.
        OldModel.objects.create(provider="local", name="unindexed", dimensions=8)
        name = f"sources_chunk_hnsw_m{indexed.pk}"
        with connection.cursor() as cursor:  # as the code before this change created it
            cursor.execute(
                f"CREATE INDEX {name} ON sources_chunk USING hnsw ((embedding::halfvec(8)) halfvec_cosine_ops) "
                f"WHERE embedding_model_id = {indexed.pk}"
            )
        assert "ef_construction" not in index_definition(name)
    finally:
        migrate(AFTER)
    assert "ef_construction='96'" in index_definition(name)
