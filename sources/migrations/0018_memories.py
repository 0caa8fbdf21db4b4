"""Issue 26 (memories): the Memory model, the memory kind of source, and when a source stops being served."""

import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("access", "0001_initial"),
        ("sources", "0017_job_progress_outcomes"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="source",
            name="expires_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="source",
            name="kind",
            field=models.CharField(
                choices=[
                    ("skill", "Skill"),
                    ("file", "Workspace files"),
                    ("tool", "Tool"),
                    ("dataset", "Evaluation dataset"),
                    ("document", "Uploaded document"),
                    ("memory", "Memory"),
                ],
                max_length=16,
            ),
        ),
        migrations.CreateModel(
            name="Memory",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "bot_id",
                    models.CharField(
                        blank=True,
                        default="",
                        help_text="Empty: shared with every bot. Otherwise only callers acting for this bot see it.",
                        max_length=128,
                        validators=[
                            django.core.validators.RegexValidator(
                                "^(?:[A-Za-z0-9_.:@-]{1,128})?$",
                                "Use letters, digits and _ . : @ - only (at most 128).",
                            )
                        ],
                    ),
                ),
                (
                    "client_id",
                    models.CharField(
                        blank=True,
                        default="",
                        help_text="Empty: shared with every client. Otherwise only callers of this client see it.",
                        max_length=128,
                        validators=[
                            django.core.validators.RegexValidator(
                                "^(?:[A-Za-z0-9_.:@-]{1,128})?$",
                                "Use letters, digits and _ . : @ - only (at most 128).",
                            )
                        ],
                    ),
                ),
                (
                    "channels",
                    models.CharField(
                        blank=True,
                        default="",
                        help_text="Channels allowed to see it, separated by spaces; empty = every channel.",
                        max_length=1024,
                        validators=[
                            django.core.validators.RegexValidator(
                                "^[A-Za-z0-9_.:@,\\s-]*$",
                                "Names separated by spaces or commas, of letters, digits and _ . : @ - only.",
                            )
                        ],
                    ),
                ),
                (
                    "index_status",
                    models.CharField(
                        choices=[
                            ("pending", "Not indexed yet"),
                            ("queued", "Queued"),
                            ("running", "Indexing"),
                            ("indexed", "Indexed"),
                            ("failed", "Failed"),
                        ],
                        default="pending",
                        editable=False,
                        max_length=16,
                    ),
                ),
                (
                    "content_hash",
                    models.CharField(
                        blank=True,
                        editable=False,
                        help_text="SHA-256 of the indexed text (sources.ingest.content_hash).",
                        max_length=64,
                    ),
                ),
                (
                    "fingerprint",
                    models.CharField(
                        blank=True,
                        editable=False,
                        help_text="What the stored chunks were made from (sources.ingest.fingerprint).",
                        max_length=64,
                    ),
                ),
                ("indexed_at", models.DateTimeField(blank=True, editable=False, null=True)),
                ("last_error", models.TextField(blank=True, editable=False)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                ("text", models.TextField(help_text="The fact, in a sentence or a few.")),
                (
                    "author",
                    models.CharField(
                        blank=True, editable=False, help_text="Who wrote it, as named then.", max_length=200
                    ),
                ),
                (
                    "conversation_id",
                    models.CharField(
                        blank=True, default="", help_text="The conversation or run it was learnt in.", max_length=200
                    ),
                ),
                (
                    "citation",
                    models.CharField(
                        blank=True,
                        default="",
                        help_text="Where the fact comes from (a citation, a URL).",
                        max_length=1000,
                    ),
                ),
                (
                    "expires_at",
                    models.DateTimeField(
                        blank=True, help_text="Not served after this; empty: never expires.", null=True
                    ),
                ),
                (
                    "approved_at",
                    models.DateTimeField(
                        blank=True,
                        editable=False,
                        help_text="Empty: awaiting approval (RAG_MEMORY_REQUIRE_APPROVAL).",
                        null=True,
                    ),
                ),
                ("superseded_at", models.DateTimeField(blank=True, editable=False, null=True)),
                (
                    "api_key",
                    models.ForeignKey(
                        blank=True,
                        editable=False,
                        help_text="The API key that wrote it.",
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="memories",
                        to="access.apikey",
                    ),
                ),
                (
                    "approved_by",
                    models.ForeignKey(
                        blank=True,
                        editable=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "source",
                    models.OneToOneField(
                        blank=True,
                        editable=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        to="sources.source",
                    ),
                ),
                (
                    "supersedes",
                    models.OneToOneField(
                        blank=True,
                        editable=False,
                        help_text="The memory this one replaced.",
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="superseded_by",
                        to="sources.memory",
                    ),
                ),
            ],
            options={
                "verbose_name": "memory",
                "verbose_name_plural": "memories",
                "ordering": ["-created_at", "-pk"],
                "indexes": [models.Index(fields=["bot_id", "client_id", "-created_at"], name="memory_scope_newest")],
            },
        ),
    ]
