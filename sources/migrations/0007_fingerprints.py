"""One fingerprint for every indexed document (sources.ingest.fingerprint).

Skills and tools gain ``fingerprint`` beside ``content_hash``, which from now
on is the SHA-256 of the indexed text; files gain ``fingerprint``. Stored
chunks that are provably current get their fingerprint here, so upgrading
re-embeds nothing that is up to date: a file indexed by the current chunker
(the chunk-size settings were not part of the old check, so the current
ones are taken as what it used), and a skill whose old fingerprint still
matches its text. Anything else (tools, evaluation datasets) is re-embedded
once, at its next index run.
"""

import hashlib

from django.conf import settings
from django.db import migrations, models

# Frozen copies of sources.chunking, sources.embedding and sources.ingest as of
# this migration: a migration never imports live code, whose later changes would
# silently rewrite what this step does to an old database.
CHUNKING_VERSION = "2"


def _identity(model) -> str:
    # sources.embedding.ModelSpec.identity
    return f"{model.provider}:{model.name}:{model.dimensions}:{'norm' if model.normalized else 'raw'}"


def content_hash(text: str) -> str:
    # sources.ingest.content_hash
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def fingerprint(*, content: str, model: str) -> str:
    # sources.ingest.fingerprint with IngestSettings.current(): the chunk settings of
    # this installation; no contextual descriptions existed yet (migration 0009), so
    # their identity is "".
    parts = [
        content,
        CHUNKING_VERSION,
        str(settings.RAG_CHUNK_MAX_CHARS),
        str(settings.RAG_CHUNK_OVERLAP),
        settings.RAG_EMBED_LONG_TEXTS,
        "",
        model,
    ]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def fingerprints_fill(apps, schema_editor):
    IndexedFile = apps.get_model("sources", "IndexedFile")
    Skill = apps.get_model("sources", "Skill")
    rows = []
    for state in (
        IndexedFile.objects.filter(chunking_version=CHUNKING_VERSION).select_related("embedding_model").iterator()
    ):
        state.fingerprint = fingerprint(content=state.content_hash, model=_identity(state.embedding_model))
        rows.append(state)
        if len(rows) >= 1000:
            IndexedFile.objects.bulk_update(rows, ["fingerprint"])
            rows = []
    IndexedFile.objects.bulk_update(rows, ["fingerprint"])
    for skill in Skill.objects.exclude(content_hash="").select_related("source__embedding_model"):
        model = skill.source.embedding_model if skill.source else None
        old = (
            None
            if model is None
            else hashlib.sha256(
                "\x1f".join(
                    [skill.body, skill.title, CHUNKING_VERSION, _identity(model), str(settings.RAG_CHUNK_MAX_CHARS)]
                ).encode()
            ).hexdigest()
        )
        current = old == skill.content_hash
        skill.content_hash = content_hash(skill.body)
        skill.fingerprint = fingerprint(content=skill.content_hash, model=_identity(model)) if current else ""
        skill.save(update_fields=["content_hash", "fingerprint"])
    apps.get_model("sources", "Tool").objects.update(content_hash="")


class Migration(migrations.Migration):
    dependencies = [("sources", "0006_root_deny_hidden_secret_scan")]

    operations = [
        migrations.AddField(
            model_name="indexedfile",
            name="fingerprint",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="skill",
            name="fingerprint",
            field=models.CharField(
                blank=True,
                editable=False,
                max_length=64,
                help_text="What the stored chunks were made from (sources.ingest.fingerprint).",
            ),
        ),
        migrations.AddField(
            model_name="tool",
            name="fingerprint",
            field=models.CharField(
                blank=True,
                editable=False,
                max_length=64,
                help_text="What the stored chunks were made from (sources.ingest.fingerprint).",
            ),
        ),
        migrations.AlterField(
            model_name="skill",
            name="content_hash",
            field=models.CharField(
                blank=True,
                editable=False,
                max_length=64,
                help_text="SHA-256 of the indexed text (sources.ingest.content_hash).",
            ),
        ),
        migrations.AlterField(
            model_name="tool",
            name="content_hash",
            field=models.CharField(
                blank=True,
                editable=False,
                max_length=64,
                help_text="SHA-256 of the indexed text (sources.ingest.content_hash).",
            ),
        ),
        migrations.RunPython(fingerprints_fill, migrations.RunPython.noop),
    ]
