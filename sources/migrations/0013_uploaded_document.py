"""Issue 24: uploaded documents, a managed library beside workspace roots, and the "document" source kind.

Written by hand: the file's storage (STORAGES["documents"], a callable on the model) and naming are
configuration, not schema: sources.models.documents.DocumentFileField keeps them out of migrations."""

import django.core.validators
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("sources", "0012_document_patterns")]

    operations = [
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
                ],
                max_length=16,
            ),
        ),
        migrations.AlterField(
            model_name="source",
            name="key",
            field=models.CharField(
                help_text="skill:<slug>, tool:<key>, root:<id>[:segment:<id>], document:<id>",
                max_length=512,
                unique=True,
            ),
        ),
        migrations.CreateModel(
            name="UploadedDocument",
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
                (
                    "name",
                    models.CharField(
                        help_text="The uploaded file's name; its suffix chooses the extractor.", max_length=255
                    ),
                ),
                ("file", models.FileField(editable=False, max_length=512)),
                ("size", models.PositiveBigIntegerField(default=0, editable=False)),
                (
                    "file_sha256",
                    models.CharField(
                        db_index=True,
                        editable=False,
                        help_text="SHA-256 of the uploaded bytes: finds duplicates.",
                        max_length=64,
                    ),
                ),
                ("enabled", models.BooleanField(default=True)),
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
            ],
            options={"ordering": ["name", "pk"], "verbose_name": "uploaded document"},
        ),
    ]
