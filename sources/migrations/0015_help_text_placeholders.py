"""Issue 28 item 8: help texts name their placeholders in capitals (the admin renders help text as HTML)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0014_watched_roots_targeted_jobs"),
    ]

    operations = [
        migrations.AlterField(
            model_name="embeddingmodel",
            name="name",
            field=models.CharField(
                help_text="Model name or local path; an API model: MODEL or MODEL@DIMENSIONS.", max_length=255
            ),
        ),
        migrations.AlterField(
            model_name="source",
            name="key",
            field=models.CharField(
                help_text="skill:SLUG, tool:KEY, root:ID, root:ID:segment:ID or document:ID",
                max_length=512,
                unique=True,
            ),
        ),
        migrations.AlterField(
            model_name="workspaceroot",
            name="embedding_model_name",
            field=models.CharField(
                blank=True,
                help_text="Empty: RAG_EMBEDDING_MODEL. A local model's name or path, or "
                "api:MODEL or api:MODEL@DIMENSIONS for the OpenAI-compatible API at RAG_LLM_BASE_URL.",
                max_length=255,
            ),
        ),
    ]
