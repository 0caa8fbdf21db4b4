import django.contrib.postgres.indexes
import django.contrib.postgres.search
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0008_indexjob_chunks_queued"),
    ]

    operations = [
        migrations.CreateModel(
            name="ChunkDescription",
            fields=[
                ("key", models.CharField(max_length=64, primary_key=True, serialize=False)),
                ("description", models.TextField()),
                (
                    "model",
                    models.CharField(
                        help_text="The identity that wrote it (RAG_CONTEXTUAL_MODEL and prompt version).",
                        max_length=255,
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
        ),
        migrations.AddField(
            model_name="indexjob",
            name="chunks_undescribed",
            field=models.PositiveIntegerField(
                default=0,
                help_text=(
                    "Chunks stored without their contextual description (the language model failed); the next run "
                    "retries them."
                ),
            ),
        ),
        # A generated column cannot change its expression in place: drop it (and
        # its GIN index) and add it again; PostgreSQL recomputes every row. No
        # row has a description yet, so every tsvector comes back exactly as it
        # was and the lexical postings (retrieval 0002), which ALTER TABLE does
        # not touch, stay right.
        migrations.RemoveIndex(model_name="chunk", name="sources_chunk_search_gin"),
        migrations.RemoveField(model_name="chunk", name="search_vector"),
        migrations.AddField(
            model_name="chunk",
            name="search_vector",
            field=models.GeneratedField(
                db_persist=True,
                expression=django.contrib.postgres.search.CombinedSearchVector(
                    django.contrib.postgres.search.CombinedSearchVector(
                        django.contrib.postgres.search.CombinedSearchVector(
                            django.contrib.postgres.search.SearchVector(
                                "symbol",
                                models.Func(
                                    models.Func(
                                        models.F("symbol"),
                                        models.Value("([a-z0-9])([A-Z])"),
                                        models.Value("\\1 \\2"),
                                        models.Value("g"),
                                        function="regexp_replace",
                                        output_field=models.TextField(),
                                    ),
                                    models.Value("._/-:"),
                                    models.Value("     "),
                                    function="translate",
                                    output_field=models.TextField(),
                                ),
                                models.Func(
                                    models.Func(
                                        models.F("path"),
                                        models.Value("([a-z0-9])([A-Z])"),
                                        models.Value("\\1 \\2"),
                                        models.Value("g"),
                                        function="regexp_replace",
                                        output_field=models.TextField(),
                                    ),
                                    models.Value("._/-:"),
                                    models.Value("     "),
                                    function="translate",
                                    output_field=models.TextField(),
                                ),
                                config="english",
                                weight="A",
                            ),
                            "||",
                            django.contrib.postgres.search.SearchVector("context_prefix", config="english", weight="B"),
                            django.contrib.postgres.search.SearchConfig("english"),
                        ),
                        "||",
                        django.contrib.postgres.search.SearchVector(
                            models.Func(
                                models.Func(
                                    models.F("content"),
                                    models.Value("([a-z0-9])([A-Z])"),
                                    models.Value("\\1 \\2"),
                                    models.Value("g"),
                                    function="regexp_replace",
                                    output_field=models.TextField(),
                                ),
                                models.Value("._/-:"),
                                models.Value("     "),
                                function="translate",
                                output_field=models.TextField(),
                            ),
                            config="english",
                            weight="C",
                        ),
                        django.contrib.postgres.search.SearchConfig("english"),
                    ),
                    "||",
                    django.contrib.postgres.search.SearchVector(
                        models.Func(
                            models.Func(
                                models.Func(
                                    models.F("metadata"),
                                    models.Value("contextual_description"),
                                    function="jsonb_extract_path_text",
                                    output_field=models.TextField(),
                                ),
                                models.Value("([a-z0-9])([A-Z])"),
                                models.Value("\\1 \\2"),
                                models.Value("g"),
                                function="regexp_replace",
                                output_field=models.TextField(),
                            ),
                            models.Value("._/-:"),
                            models.Value("     "),
                            function="translate",
                            output_field=models.TextField(),
                        ),
                        config="english",
                        weight="C",
                    ),
                    django.contrib.postgres.search.SearchConfig("english"),
                ),
                output_field=django.contrib.postgres.search.SearchVectorField(),
            ),
        ),
        migrations.AddIndex(
            model_name="chunk",
            index=django.contrib.postgres.indexes.GinIndex(fields=["search_vector"], name="sources_chunk_search_gin"),
        ),
        migrations.AlterField(
            model_name="embeddingmodel",
            name="name",
            field=models.CharField(
                help_text="Model name or local path; an API model: <model>[@<dimensions>].", max_length=255
            ),
        ),
        migrations.AlterField(
            model_name="embeddingmodel",
            name="provider",
            field=models.CharField(
                choices=[("local", "Local (sentence-transformers)"), ("api", "OpenAI-compatible API (/embeddings)")],
                default="local",
                max_length=32,
            ),
        ),
        migrations.AlterField(
            model_name="segment",
            name="embedding_model_name",
            field=models.CharField(
                blank=True, help_text="Empty: the root's model. Named as the root's is.", max_length=255
            ),
        ),
        migrations.AlterField(
            model_name="workspaceroot",
            name="embedding_model_name",
            field=models.CharField(
                blank=True,
                help_text=(
                    "Empty: RAG_EMBEDDING_MODEL. A local model's name or path, or api:<model>[@<dimensions>] for the "
                    "OpenAI-compatible API at RAG_LLM_BASE_URL."
                ),
                max_length=255,
            ),
        ),
    ]
