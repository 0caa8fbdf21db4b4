"""Indexing documents: the one chunk -> embed -> replace path for skills, tools, files and datasets.

A *document* is what one source stores under one path: a skill's body, a
tool's schema, a file of a root, a dataset's passage. Each kind turns its
item into documents; everything after that is here:

- ``fingerprint`` is the one definition of "unchanged": the content's hash,
  the chunker's version and settings, how long texts are embedded, the
  embedding model's identity and the contextual-description setting. Equal
  fingerprints mean the stored chunks are exactly what indexing would write
  now; anything else re-chunks and re-embeds.
- ``Batch`` collects documents across sources and files, embeds them in
  large calls per model and replaces their chunks.
- ``documents_replace`` swaps the chunks of whole documents in one
  transaction with one DELETE and one bulk INSERT: a search never sees half a
  document, and no statement runs per chunk.
- ``item_*``: the status lifecycle of skills and tools (queued -> running ->
  indexed or failed with the reason). Roots run as index jobs (jobs.py);
  datasets are indexed by the eval command.
"""

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from rag_site.errors import ApplicationError
from sources.chunking import CHUNKING_VERSION, ChunkResult
from sources.embedding import EmbeddingError, embedder_for
from sources.models import Chunk, EmbeddingModel, IndexedFile, IndexStatus, Source


class IndexingError(ApplicationError):
    """Indexing failed for a reason worth showing to the source's owner; retrying will not help."""


@dataclass(frozen=True, slots=True)
class IngestSettings:
    """Everything besides the text and the model that decides the stored chunks."""

    max_chars: int
    overlap: int
    long_texts: str  # RAG_EMBED_LONG_TEXTS: "truncate" or "pieces"
    contextual: str = ""  # the contextual-description model's identity; "" = no descriptions

    @classmethod
    def current(cls) -> "IngestSettings":
        return cls(max_chars=settings.RAG_CHUNK_MAX_CHARS, overlap=settings.RAG_CHUNK_OVERLAP,
                   long_texts=settings.RAG_EMBED_LONG_TEXTS)


def content_hash(text: str) -> str:
    """The SHA-256 of a text as stored (a caller can check it against the file or skill it read)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def fingerprint(*, content: str, model: str, config: IngestSettings) -> str:
    """The one fingerprint of stored chunks: ``content`` is the document's content hash, ``model`` the model's identity."""
    parts = [content, CHUNKING_VERSION, str(config.max_chars), str(config.overlap), config.long_texts,
             config.contextual, model]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class IndexOutcome:
    """What indexing one skill or tool did."""

    skipped: bool  # its fingerprint was unchanged: nothing embedded
    chunks_embedded: int = 0
    chunks_deleted: int = 0


@dataclass(slots=True)
class Document:
    source: Source
    generation: int
    path: str  # "" for a skill or tool
    chunks: list[ChunkResult]
    model: EmbeddingModel
    content_hash: str = ""
    fingerprint: str = ""
    # Files: the stat that lets the next pass skip them unread.
    size: int = 0
    mtime_ns: int = 0
    vectors: np.ndarray | None = None


def embedding_model_for(name: str = "") -> EmbeddingModel:
    """The row of a local model (default: RAG_EMBEDDING_MODEL), with its HNSW index."""
    embedder = embedder_for(provider="local", name=name or settings.RAG_EMBEDDING_MODEL, device=settings.RAG_EMBEDDING_DEVICE)
    spec = embedder.spec
    model, created = EmbeddingModel.objects.get_or_create(
        provider=spec.provider, name=spec.name, dimensions=spec.dimensions, normalized=spec.normalized
    )
    if created:
        embedding_model_index_ensure(model=model)
    return model


def embedding_model_index_ensure(*, model: EmbeddingModel) -> None:
    """A partial HNSW index per model on ``embedding::halfvec(N)``.

    One vector column holds every model's vectors; the cast to a fixed
    dimension plus the partial predicate is pgvector's documented way to
    index several dimensions in one table (halfvec halves the index size).
    """
    dims = int(model.dimensions)
    with connection.cursor() as cursor:
        if connection.in_atomic_block:
            # PostgreSQL refuses CREATE INDEX while deferred foreign-key
            # checks on the table are pending in this transaction.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS {model.hnsw_index_name} ON {Chunk._meta.db_table} "
            f"USING hnsw ((embedding::halfvec({dims})) halfvec_cosine_ops) "
            f"WHERE embedding_model_id = {int(model.pk)}"
        )


def embed_text(chunk: ChunkResult, path: str = "") -> str:
    # Path, symbol and heading path tell the model what the text is about;
    # the content alone often does not name its topic.
    header = " · ".join(part for part in (path, chunk.symbol, chunk.context_prefix) if part)
    return f"{header}\n\n{chunk.content}" if header else chunk.content


def documents_embed(documents: Sequence[Document], *, on_batch: Callable[[], None] | None = None) -> None:
    """Embed every chunk of ``documents``, in batches across documents, one call per model; sets ``vectors``.

    ``on_batch`` runs after each embedding batch: a job beats its heart there,
    so one long embedding call never looks like a dead worker. A model that
    fails raises IndexingError with its reason.
    """
    for model, group in _by_model(documents).items():
        texts = [embed_text(chunk, d.path) for d in group for chunk in d.chunks]
        try:
            vectors = embedder_for(provider=model.provider, name=model.name, device=settings.RAG_EMBEDDING_DEVICE).embed(
                texts, batch_size=settings.RAG_EMBED_BATCH_SIZE, pieces=settings.RAG_EMBED_LONG_TEXTS == "pieces",
                on_batch=on_batch,
            )
        except EmbeddingError as exc:
            raise IndexingError(str(exc)) from exc
        offset = 0
        for d in group:
            d.vectors = vectors[offset : offset + len(d.chunks)]
            offset += len(d.chunks)


@transaction.atomic
def documents_replace(documents: Sequence[Document], *, track_files: bool) -> int:
    """Replace the chunks of ``documents``; returns how many rows were deleted.

    ``track_files``: also record each document's state (IndexedFile), which
    lets the next pass skip it; skills and tools keep theirs on their own row.
    """
    deleted = 0
    for (source_id, generation), paths in _by_position(documents).items():
        deleted += Chunk.objects.filter(source_id=source_id, generation=generation, path__in=paths).delete()[0]
    Chunk.objects.bulk_create(
        [
            Chunk(
                source=d.source, generation=d.generation, path=d.path, chunk_index=index, content=chunk.content,
                context_prefix=chunk.context_prefix, language=chunk.language, symbol=chunk.symbol,
                start_line=chunk.start_line, end_line=chunk.end_line, content_hash=content_hash(chunk.content),
                embedding=vector, embedding_model=d.model, chunking_version=CHUNKING_VERSION, metadata=chunk.metadata,
            )
            for d in documents
            for index, (chunk, vector) in enumerate(zip(d.chunks, d.vectors, strict=True))
        ],
        batch_size=1000,
    )
    if track_files:
        IndexedFile.objects.bulk_create(
            [
                IndexedFile(
                    source=d.source, generation=d.generation, path=d.path, size=d.size, mtime_ns=d.mtime_ns,
                    content_hash=d.content_hash, fingerprint=d.fingerprint, chunking_version=CHUNKING_VERSION,
                    embedding_model=d.model, chunk_count=len(d.chunks),
                )
                for d in documents
            ],
            update_conflicts=True,
            unique_fields=["source", "generation", "path"],
            update_fields=["size", "mtime_ns", "content_hash", "fingerprint", "chunking_version", "embedding_model",
                           "chunk_count", "indexed_at"],
        )
    return deleted


class Batch:
    """Documents collected across files and sources, embedded and stored once enough chunks wait.

    Big embedding calls pad less (the model sorts a call's texts by length):
    see RAG_INDEX_FLUSH_CHUNKS.
    """

    def __init__(self, *, track_files: bool, flush_chunks: int | None = None, on_batch: Callable[[], None] | None = None) -> None:
        self.track_files = track_files
        self.flush_chunks = flush_chunks or settings.RAG_INDEX_FLUSH_CHUNKS
        self.on_batch = on_batch
        self.pending: list[Document] = []
        self.pending_chunks = 0
        self.embedded = 0
        self.deleted = 0

    def add(self, document: Document) -> None:
        self.pending.append(document)
        self.pending_chunks += len(document.chunks)
        if self.pending_chunks >= self.flush_chunks:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        documents_embed(self.pending, on_batch=self.on_batch)
        self.deleted += documents_replace(self.pending, track_files=self.track_files)
        self.embedded += self.pending_chunks
        self.pending, self.pending_chunks = [], 0


def item_unchanged(item_model: type, pk: int) -> None:
    """A skill or tool whose fingerprint matches: nothing to embed, and no old error to show."""
    item_model.objects.filter(pk=pk).update(index_status=IndexStatus.INDEXED, last_error="")


def item_running(item_model: type, pk: int) -> None:
    item_model.objects.filter(pk=pk).update(index_status=IndexStatus.RUNNING)


def item_failed(item_model: type, pk: int, reason: str) -> None:
    """The skill or tool keeps its previous chunks; the reason shows in the admin and the API."""
    item_model.objects.filter(pk=pk).update(index_status=IndexStatus.FAILED, last_error=reason[:2000])


def item_store(item_model: type, pk: int, document: Document, **fields) -> int | None:
    """Embed and store a skill's or tool's document, and record it indexed with ``fields``.

    Returns the chunks deleted, or None when the item was deleted meanwhile.
    The item's row lock serialises two workers indexing the same item.
    """
    documents_embed([document])
    with transaction.atomic():
        if not item_model.objects.select_for_update().filter(pk=pk).exists():
            return None
        deleted = documents_replace([document], track_files=False)
        Source.objects.filter(pk=document.source.pk).update(embedding_model=document.model)
        item_model.objects.filter(pk=pk).update(
            content_hash=document.content_hash, fingerprint=document.fingerprint, indexed_at=timezone.now(),
            index_status=IndexStatus.INDEXED, last_error="", **fields,
        )
    return deleted


def _by_model(documents: Sequence[Document]) -> dict[EmbeddingModel, list[Document]]:
    groups: dict[int, tuple[EmbeddingModel, list[Document]]] = {}
    for d in documents:
        groups.setdefault(d.model.pk, (d.model, []))[1].append(d)
    return dict(groups.values())


def _by_position(documents: Sequence[Document]) -> dict[tuple[int, int], list[str]]:
    groups: dict[tuple[int, int], list[str]] = {}
    for d in documents:
        groups.setdefault((d.source.pk, d.generation), []).append(d.path)
    return groups
