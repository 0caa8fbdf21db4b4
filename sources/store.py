"""Chunk storage: the one write path for skills, tools and files.

Each call replaces the chunks of whole files (by source, generation and
path) in one transaction with one DELETE and one bulk INSERT: a search never
sees half a file, and no statement runs per chunk.
"""

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db import connection, transaction

from sources.chunking import CHUNKING_VERSION, ChunkResult
from sources.embedding import embedder_for
from sources.models import Chunk, EmbeddingModel, IndexedFile, Source


@dataclass(slots=True)
class FileChunks:
    source: Source
    generation: int
    path: str
    chunks: list[ChunkResult]
    # For workspace files: the state that makes the next pass skip it.
    size: int = 0
    mtime_ns: int = 0
    content_hash: str = ""
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
            f"CREATE INDEX IF NOT EXISTS {model.hnsw_index_name} ON sources_chunk "
            f"USING hnsw ((embedding::halfvec({dims})) halfvec_cosine_ops) "
            f"WHERE embedding_model_id = {int(model.pk)}"
        )


def embed_text(chunk: ChunkResult, path: str = "") -> str:
    # Path, symbol and heading path tell the model what the text is about;
    # the content alone often does not name its topic.
    header = " · ".join(part for part in (path, chunk.symbol, chunk.context_prefix) if part)
    return f"{header}\n\n{chunk.content}" if header else chunk.content


def files_embed(files: Sequence[FileChunks], *, model: EmbeddingModel, on_batch: Callable[[], None] | None = None) -> None:
    """Embed every chunk of ``files`` in batches across files; sets ``vectors``.

    ``on_batch`` runs after each embedding batch: a job beats its heart there,
    so one long embedding call never looks like a dead worker.
    """
    texts = [embed_text(chunk, f.path) for f in files for chunk in f.chunks]
    vectors = embedder_for(provider=model.provider, name=model.name, device=settings.RAG_EMBEDDING_DEVICE).embed(
        texts, batch_size=settings.RAG_EMBED_BATCH_SIZE, pieces=settings.RAG_EMBED_LONG_TEXTS == "pieces", on_batch=on_batch
    )
    offset = 0
    for f in files:
        f.vectors = vectors[offset : offset + len(f.chunks)]
        offset += len(f.chunks)


@transaction.atomic
def files_replace(files: Sequence[FileChunks], *, model: EmbeddingModel, track_state: bool) -> int:
    """Replace the chunks of ``files``; returns how many rows were deleted."""
    deleted = 0
    for (source_id, generation), paths in _group(files).items():
        deleted += Chunk.objects.filter(source_id=source_id, generation=generation, path__in=paths).delete()[0]
    Chunk.objects.bulk_create(
        [
            Chunk(
                source=f.source, generation=f.generation, path=f.path, chunk_index=index, content=chunk.content,
                context_prefix=chunk.context_prefix, language=chunk.language, symbol=chunk.symbol,
                start_line=chunk.start_line, end_line=chunk.end_line,
                content_hash=hashlib.sha256(chunk.content.encode("utf-8", "surrogatepass")).hexdigest(),
                embedding=vector, embedding_model=model, chunking_version=CHUNKING_VERSION, metadata=chunk.metadata,
            )
            for f in files
            for index, (chunk, vector) in enumerate(zip(f.chunks, f.vectors, strict=True))
        ],
        batch_size=1000,
    )
    if track_state:
        IndexedFile.objects.bulk_create(
            [
                IndexedFile(
                    source=f.source, generation=f.generation, path=f.path, size=f.size, mtime_ns=f.mtime_ns,
                    content_hash=f.content_hash, chunking_version=CHUNKING_VERSION, embedding_model=model,
                    chunk_count=len(f.chunks),
                )
                for f in files
            ],
            update_conflicts=True,
            unique_fields=["source", "generation", "path"],
            update_fields=["size", "mtime_ns", "content_hash", "chunking_version", "embedding_model", "chunk_count", "indexed_at"],
        )
    return deleted


def _group(files: Sequence[FileChunks]) -> dict[tuple[int, int], list[str]]:
    groups: dict[tuple[int, int], list[str]] = {}
    for f in files:
        groups.setdefault((f.source.pk, f.generation), []).append(f.path)
    return groups
