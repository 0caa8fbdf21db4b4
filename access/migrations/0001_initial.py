"""The access app takes over ApiKey and AccessGrant from the retrieval app (issue 23).

The tables stay where the retrieval app created them (retrieval_apikey, retrieval_accessgrant): this migration
only tells Django's model state that they are the access app's now, and renames their content types, so the
permissions already given to people (the console's two named permissions, add/change/view of keys and grants)
and the admin's history keep pointing at the same rows.
"""

import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MODELS = ("apikey", "accessgrant")


def _content_types_to(apps, schema_editor, *, old: str, new: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MODELS:
        if ContentType.objects.filter(app_label=new, model=model).exists():
            continue  # already there (a database that never had the old one): nothing to carry over
        ContentType.objects.filter(app_label=old, model=model).update(app_label=new)


def content_types_forward(apps, schema_editor) -> None:
    _content_types_to(apps, schema_editor, old="retrieval", new="access")


def content_types_backward(apps, schema_editor) -> None:
    _content_types_to(apps, schema_editor, old="access", new="retrieval")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("retrieval", "0003_console_permissions"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("auth", "0012_alter_user_first_name_max_length"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ApiKey",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "bot_id",
                            models.CharField(
                                blank=True,
                                default="",
                                help_text=(
                                    "Empty: shared with every bot. Otherwise only callers acting for this bot see it."
                                ),
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
                                help_text=(
                                    "Empty: shared with every client. Otherwise only callers of this client see it."
                                ),
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
                        ("name", models.CharField(help_text="Who uses it, e.g. the bot's name.", max_length=200)),
                        (
                            "prefix",
                            models.CharField(
                                editable=False,
                                help_text="The key's public start, to recognise it.",
                                max_length=16,
                                unique=True,
                            ),
                        ),
                        ("key_hash", models.CharField(editable=False, max_length=64)),
                        (
                            "can_manage",
                            models.BooleanField(
                                default=False,
                                help_text="May list roots and index jobs and start re-index jobs (sees server paths).",
                                verbose_name="manage permission",
                            ),
                        ),
                        (
                            "rate_limit_per_minute",
                            models.PositiveIntegerField(
                                blank=True,
                                help_text="Requests per minute; empty: RAG_RATE_LIMIT_PER_MINUTE; 0: no limit.",
                                null=True,
                            ),
                        ),
                        ("expires_at", models.DateTimeField(blank=True, help_text="Empty: never expires.", null=True)),
                        ("revoked_at", models.DateTimeField(blank=True, editable=False, null=True)),
                        ("last_used_at", models.DateTimeField(blank=True, editable=False, null=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "created_by",
                            models.ForeignKey(
                                blank=True,
                                editable=False,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "verbose_name": "API key",
                        "db_table": "retrieval_apikey",
                        "ordering": ["name", "pk"],
                    },
                ),
                migrations.CreateModel(
                    name="AccessGrant",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "bot_id",
                            models.CharField(
                                blank=True,
                                default="",
                                help_text=(
                                    "Empty: shared with every bot. Otherwise only callers acting for this bot see it."
                                ),
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
                                help_text=(
                                    "Empty: shared with every client. Otherwise only callers of this client see it."
                                ),
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
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "group",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="access_grants",
                                to="auth.group",
                            ),
                        ),
                        (
                            "user",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="access_grants",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "retrieval_accessgrant",
                        "permissions": [
                            ("view_index_overview", "Can view the index overview in the admin console"),
                            ("use_try_search", "Can use the admin console's try-search"),
                        ],
                        "constraints": [
                            models.CheckConstraint(
                                condition=models.Q(
                                    models.Q(("group__isnull", True), ("user__isnull", False)),
                                    models.Q(("group__isnull", False), ("user__isnull", True)),
                                    _connector="OR",
                                ),
                                name="access_grant_user_or_group",
                                violation_error_message="A grant is for one user or one group.",
                            )
                        ],
                    },
                ),
            ],
            database_operations=[],  # the tables exist: retrieval 0001 and 0003 made them
        ),
        migrations.RunPython(content_types_forward, content_types_backward),
    ]
