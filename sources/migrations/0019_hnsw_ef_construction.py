"""Issue 30 (HNSW recall at scale): existing HNSW indexes link new vectors with RAG_HNSW_EF_CONSTRUCTION.

New indexes are created with it (sources/ingest.py). An index built before
keeps its graph, but the chunks inserted from now on are linked with the
setting's candidate list; `REINDEX INDEX CONCURRENTLY` rebuilds the whole
graph with it (docs/operations.md). Nothing is rebuilt here: at a million
chunks that took 7-10 minutes on 2 cores, too long for a start-up.
"""

from django.conf import settings
from django.db import migrations

DEFAULT = 200  # the setting's default when this was written


def hnsw_ef_construction_set(apps, schema_editor):
    ef_construction = int(getattr(settings, "RAG_HNSW_EF_CONSTRUCTION", DEFAULT))
    EmbeddingModel = apps.get_model("sources", "EmbeddingModel")
    with schema_editor.connection.cursor() as cursor:
        for pk in EmbeddingModel.objects.using(schema_editor.connection.alias).values_list("pk", flat=True):
            # IF EXISTS: a model whose index was never made (or was dropped by hand) has nothing to alter.
            name = f"sources_chunk_hnsw_m{int(pk)}"
            cursor.execute(f"ALTER INDEX IF EXISTS {name} SET (ef_construction = {ef_construction})")


class Migration(migrations.Migration):
    dependencies = [("sources", "0018_memories")]

    operations = [migrations.RunPython(hnsw_ef_construction_set, migrations.RunPython.noop)]
