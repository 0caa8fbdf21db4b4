"""Issue 41: the text of each indexed file, under a pg_trgm GIN index, for grep answered from the index.

No data step: a file indexed before has no text yet, and the next index job
stores it without embedding again (sources/pipeline/run.py).
"""

import django.contrib.postgres.indexes
import django.db.models.deletion
from django.contrib.postgres.operations import TrigramExtension
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("sources", "0024_words_first")]

    operations = [
        TrigramExtension(),
        migrations.CreateModel(
            name="FileText",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("generation", models.PositiveIntegerField(default=0)),
                ("path", models.CharField(max_length=1024)),
                ("text", models.TextField()),
                ("anchors", models.JSONField(blank=True, default=list)),
                (
                    "source",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="texts", to="sources.source"
                    ),
                ),
            ],
            options={
                "indexes": [
                    django.contrib.postgres.indexes.GinIndex(
                        django.contrib.postgres.indexes.OpClass("text", name="gin_trgm_ops"), name="file_text_trgm"
                    )
                ],
                "constraints": [
                    models.UniqueConstraint(fields=("source", "generation", "path"), name="file_text_unique")
                ],
            },
        ),
        # Stored out of line but not compressed: grep's LIKE recheck and its line scan read whole texts, and
        # decompressing each costs more than the disk it saves.
        migrations.RunSQL(
            "ALTER TABLE sources_filetext ALTER COLUMN text SET STORAGE EXTERNAL",
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
