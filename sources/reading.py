"""Bytes -> text -> chunks: the one set of rules every connector's items and every upload go through.

In order: the size limit (text files and documents each have theirs), a Git
LFS pointer (the content is elsewhere), the extractor the name calls for
(an HTML fragment or template is code, read as text: only whole pages are
documents), then for text the NUL probe, UTF-8 and the secret scan, and for
a document the extraction in a child process under its limits followed by
the same secret scan over the extracted text. Whatever fails comes back as
a ``Skipped`` with its reason; ``reason_failed`` tells a failure (unreadable,
a broken document) from a skip by design (a secret, a scan with no text).

Two steps, so a caller can stop between them: ``content_read`` is cheap
(it decodes text and hashes), and its digest, in the fingerprint with
``extractor_identity``, says whether the stored chunks are still current
before ``content_chunks`` runs the extraction. ``bytes_chunks`` is both at once.

No database: the rules are injected (``ReadRules``), built once per job or
upload by the caller.
"""

import hashlib
from dataclasses import dataclass

from sources.chunking import ChunkResult, chunk_text
from sources.extract import Anchor, ExtractionRefused, Extractor, Limits, extractor_for
from sources.extract.chunks import document_chunks
from sources.extract.html import html_document
from sources.extract.sandbox import extract
from sources.git import LFS_POINTER, LFS_REASON
from sources.sensitive import secret_found
from sources.walk import Skipped, text_of

# Reasons of an item that could not be read or extracted (a failure), as opposed to one skipped by design (a
# secret, an encrypted PDF, a scan without a text layer).
_FAILURES = ("unreadable", "extraction", "not a valid", "zip bomb", "no extractor")


def reason_failed(reason: str) -> bool:
    """Whether a skip reason is a failure (counted and shown as failed) rather than a skip by design."""
    return reason.startswith(_FAILURES)


@dataclass(frozen=True, slots=True)
class ReadRules:
    """What reading one item may take and must refuse; built once by the caller (a job, an upload)."""

    max_chars: int  # chunking: the chunk size (RAG_CHUNK_MAX_CHARS)
    overlap: int  # and its overlap (RAG_CHUNK_OVERLAP)
    limits: Limits  # RAG_EXTRACT_*: one extraction's time and memory
    scan_secrets: bool = True
    max_text_bytes: int = 0  # 0: no limit of its own here (the connector read within it)
    max_document_bytes: int = 0  # a document's, when larger than the text limit; 0: the text limit


@dataclass(frozen=True, slots=True)
class Content:
    """An item's bytes that passed the cheap rules: what its fingerprint needs, and what chunking reads."""

    path: str
    raw: bytes
    digest: str  # the content hash the fingerprint starts from (a text's UTF-8, a document's bytes)
    text: str  # a text item's text; "" for a document until it is extracted
    extractor: Extractor | None  # None: read as text (also an HTML fragment)

    @property
    def document(self) -> bool:
        return self.extractor is not None


@dataclass(frozen=True, slots=True)
class Chunked:
    text: str  # the whole text (the extracted one for a document), stored for grep and contextual descriptions
    chunks: list[ChunkResult]
    anchors: tuple[Anchor, ...] = ()  # a document's pages, slides or sheets


def extractor_identity(path: str) -> str:
    """The extractor's part of an item's fingerprint: the identity of the one its name calls for, "" for text."""
    extractor = extractor_for(path)
    return extractor.identity if extractor else ""


def content_read(raw: bytes, path: str, rules: ReadRules, *, name: str = "") -> Content | Skipped:
    """The size, LFS, NUL, UTF-8 and (for text) secret rules; the extraction waits for ``content_chunks``.

    ``name``: whose suffix picks the extractor when the path's does not (a URL); "": the path."""
    extractor = extractor_for(name or path)
    limit = rules.max_text_bytes
    if extractor is not None and rules.max_document_bytes > limit:
        limit = rules.max_document_bytes
    if limit and len(raw) > limit:
        return Skipped(path, f"too large: {len(raw):,} bytes (limit {limit:,})")
    if raw.startswith(LFS_POINTER):
        return Skipped(path, LFS_REASON)
    # An HTML fragment or template is code, read as text; only whole pages are documents.
    if extractor is not None and (extractor.kind != "html" or html_document(raw)):
        return Content(path, raw, hashlib.sha256(raw).hexdigest(), "", extractor)
    text = text_of(raw, path, scan_secrets=rules.scan_secrets)
    if isinstance(text, Skipped):
        return text
    return Content(path, raw, hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(), text, None)


def content_chunks(content: Content, rules: ReadRules) -> Chunked | Skipped:
    """The chunks of what ``content_read`` let through: a document extracted in the sandbox, then scanned."""
    if content.extractor is None:
        return Chunked(
            content.text, chunk_text(content.text, content.path, max_chars=rules.max_chars, overlap=rules.overlap)
        )
    try:
        extracted = extract(content.extractor.kind, content.raw, rules.limits)
    except ExtractionRefused as refused:
        return Skipped(content.path, refused.reason)
    if rules.scan_secrets and (secret := secret_found(extracted.text)):
        return Skipped(content.path, f"contains a secret ({secret})")
    chunks = document_chunks(extracted, content.path, max_chars=rules.max_chars, overlap=rules.overlap)
    return Chunked(extracted.text, chunks, tuple(extracted.anchors))


def bytes_chunks(raw: bytes, path: str, rules: ReadRules, *, name: str = "") -> tuple[Content, Chunked] | Skipped:
    """Both steps at once, for a caller that has decided to read the item whole (an upload)."""
    content = content_read(raw, path, rules, name=name)
    if isinstance(content, Skipped):
        return content
    chunked = content_chunks(content, rules)
    if isinstance(chunked, Skipped):
        return chunked
    return content, chunked
