"""A version per chunking strategy in every fingerprint (issue 40 item 3), and only the chunk settings it reads.

The fingerprint (sources.ingest.fingerprint) held one global chunker version
("2") and both chunk settings for every document; it now holds the identity
of the strategy that chunks the document (``markdown:1+window:1``,
``document:1+markdown:1+window:1``, ...) and only the settings that strategy
reads: a skill does not read RAG_CHUNK_OVERLAP, a tool or a memory neither
setting. The chunkers' output is unchanged, so every stored fingerprint that
the old formula still confirms (same content, settings, model and extractor
as now) is recomputed with the new one: upgrading re-embeds nothing. One the
old formula does not confirm was stale already and stays so: the next index
run re-embeds it, as it would have.

``chunking_version`` grows to 64 characters to hold such identities (new
rows write theirs; rows written before keep "2").
"""

import hashlib
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import PurePosixPath

from django.conf import settings
from django.db import migrations, models

# Frozen copies of sources.chunking (language_for, strategies.py), sources.extract (EXTRACTORS), sources.contextual
# and sources.ingest as of this migration: a migration never imports live code, whose later changes would silently
# rewrite what this step does to an old database.
OLD_CHUNKING_VERSION = "2"
MARKDOWN = {".md", ".markdown", ".mdx", ".mdown"}
DATA = {".json", ".yaml", ".yml", ".toml"}
GRAMMARS = {
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".kt": "kotlin",
    ".kts": "kotlin",
    ".scala": "scala",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
    ".cs": "csharp",
    ".rb": "ruby",
    ".php": "php",
    ".swift": "swift",
    ".lua": "lua",
    ".sh": "bash",
    ".bash": "bash",
}
WINDOW = "window:1"
MARKDOWN_IDENTITY = f"markdown:1+{WINDOW}"
DOCUMENT = f"document:1+{MARKDOWN_IDENTITY}"
SKILL = f"skill:1+{MARKDOWN_IDENTITY}"
WHOLE = "whole:1"
# suffix -> (kind, library, revision, also): sources.extract.EXTRACTORS
EXTRACTORS = {
    ".pdf": ("pdf", "pypdf", 2, ("pdfplumber",)),
    ".docx": ("docx", "python-docx", 1, ()),
    ".pptx": ("pptx", "python-pptx", 1, ()),
    ".xlsx": ("xlsx", "openpyxl", 1, ()),
    ".csv": ("csv", "", 1, ()),
    ".tsv": ("tsv", "", 1, ()),
    ".html": ("html", "", 1, ()),
    ".htm": ("html", "", 1, ()),
}
PROMPT_VERSION = "1"  # sources.contextual.PROMPT_VERSION


@cache  # read once per distribution, not once per document
def _library_version(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "missing"


def extractor_identity(path: str) -> str:
    # sources.extract.Extractor.identity of extractor_for(path); "" for a text file
    found = EXTRACTORS.get(PurePosixPath(path).suffix.lower())
    if found is None:
        return ""
    kind, library, revision, also = found
    name = f"{library}-{_library_version(library)}" if library else "stdlib"
    name += "".join(f"+{other}-{_library_version(other)}" for other in also)
    return f"{kind}:{name}:{revision}"


def chunker_identity(path: str, *, document: bool = False) -> str:
    # sources.chunking.chunker_identity
    if document:
        return DOCUMENT
    suffix = PurePosixPath(path).suffix.lower()
    if suffix in MARKDOWN:
        return MARKDOWN_IDENTITY
    if suffix in (".py", ".pyi"):
        return f"code-python:1+{WINDOW}"
    if suffix == ".ipynb":
        return f"notebook:1+{WINDOW}"
    if suffix in DATA:
        return f"structured:1+{WINDOW}"
    if suffix in GRAMMARS:
        return f"code-{GRAMMARS[suffix]}:1+code:1+{WINDOW}"
    return WINDOW


def _identity(model) -> str:
    # sources.embedding.ModelSpec.identity
    return f"{model.provider}:{model.name}:{model.dimensions}:{'norm' if model.normalized else 'raw'}"


def _contextual() -> str:
    # sources.contextual.contextual_identity(sources.config.contextual_config())
    if not settings.RAG_CONTEXTUAL_RETRIEVAL:
        return ""
    return f"{settings.RAG_CONTEXTUAL_MODEL}#prompt-{PROMPT_VERSION}"


def _hash(parts: list[str], extractor: str) -> str:
    if extractor:
        parts.append(extractor)
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def old_fingerprint(*, content: str, model: str, extractor: str = "") -> str:
    # sources.ingest.fingerprint before this migration, with this installation's settings
    max_chars, overlap = str(settings.RAG_CHUNK_MAX_CHARS), str(settings.RAG_CHUNK_OVERLAP)
    parts = [content, OLD_CHUNKING_VERSION, max_chars, overlap, settings.RAG_EMBED_LONG_TEXTS, _contextual(), model]
    return _hash(parts, extractor)


def new_fingerprint(*, content: str, model: str, chunker: str, extractor: str = "") -> str:
    # sources.ingest.fingerprint from this migration on: the skill reads no overlap, a whole item no chunk setting
    max_chars = "" if chunker == WHOLE else str(settings.RAG_CHUNK_MAX_CHARS)
    overlap = "" if chunker in (WHOLE, SKILL) else str(settings.RAG_CHUNK_OVERLAP)
    parts = [content, chunker, max_chars, overlap, settings.RAG_EMBED_LONG_TEXTS, _contextual(), model]
    return _hash(parts, extractor)


def _renewed(fingerprint: str, *, content: str, model, chunker: str, extractor: str = "") -> str | None:
    """The new fingerprint of stored chunks the old one confirms current; None: stale (or never indexed), kept."""
    if not fingerprint or model is None:
        return None
    identity = _identity(model)
    if fingerprint != old_fingerprint(content=content, model=identity, extractor=extractor):
        return None
    return new_fingerprint(content=content, model=identity, chunker=chunker, extractor=extractor)


def _files(apps) -> None:
    IndexedFile = apps.get_model("sources", "IndexedFile")
    rows = []
    for state in IndexedFile.objects.exclude(fingerprint="").select_related("source", "embedding_model").iterator():
        if state.source.kind == "dataset":  # measure.evaluation: a passage is plain text, with no extractor
            chunker, extractor = WINDOW, ""
        else:  # a root's file: sources.pipeline.run._Run._fingerprint
            extractor = extractor_identity(state.path)
            chunker = chunker_identity(state.path, document=bool(extractor))
        renewed = _renewed(
            state.fingerprint,
            content=state.content_hash,
            model=state.embedding_model,
            chunker=chunker,
            extractor=extractor,
        )
        if renewed is not None:
            state.fingerprint = renewed
            rows.append(state)
        if len(rows) >= 1000:
            IndexedFile.objects.bulk_update(rows, ["fingerprint"])
            rows = []
    IndexedFile.objects.bulk_update(rows, ["fingerprint"])


def _items(apps, name: str, chunker_of) -> None:
    """Skills, tools, memories, uploads: ``chunker_of(item)`` gives (content, chunker, extractor)."""
    Item = apps.get_model("sources", name)
    rows = []
    for item in Item.objects.exclude(fingerprint="").select_related("source__embedding_model").iterator():
        content, chunker, extractor = chunker_of(item)
        model = item.source.embedding_model if item.source else None
        renewed = _renewed(item.fingerprint, content=content, model=model, chunker=chunker, extractor=extractor)
        if renewed is not None:
            item.fingerprint = renewed
            rows.append(item)
        if len(rows) >= 1000:
            Item.objects.bulk_update(rows, ["fingerprint"])
            rows = []
    Item.objects.bulk_update(rows, ["fingerprint"])


def _upload(document) -> tuple[str, str, str]:
    # sources.uploads.document_index: the stored file's SHA-256; always extracted when an extractor exists
    extractor = extractor_identity(document.name)
    return document.file_sha256, chunker_identity(document.name, document=bool(extractor)), extractor


def fingerprints_renew(apps, schema_editor) -> None:
    _files(apps)
    _items(apps, "Skill", lambda skill: (skill.content_hash, SKILL, ""))
    _items(apps, "Tool", lambda tool: (tool.content_hash, WHOLE, ""))
    _items(apps, "Memory", lambda memory: (memory.content_hash, WHOLE, ""))
    _items(apps, "UploadedDocument", _upload)


class Migration(migrations.Migration):
    dependencies = [("sources", "0020_git_credential_bindings")]

    operations = [
        migrations.AlterField(model_name="chunk", name="chunking_version", field=models.CharField(max_length=64)),
        migrations.AlterField(model_name="indexedfile", name="chunking_version", field=models.CharField(max_length=64)),
        # Backwards the new fingerprints stay: the old code finds them stale and re-embeds once.
        migrations.RunPython(fingerprints_renew, migrations.RunPython.noop),
    ]
