"""Indexing documents: the one chunk -> embed -> replace path for skills, tools, files and datasets.

A *document* is what one source stores under one path: a skill's body, a
tool's schema, a file of a root, a dataset's passage. Each kind turns its
item into documents; everything after that is here:

- ``fingerprint`` is the one definition of "unchanged": the content's hash,
  the identity of the chunking strategy that chunks it (its own version and
  those of the strategies it uses) and the chunk settings it reads, how long
  texts are embedded, the
  embedding model's identity and the contextual-description setting. Equal
  fingerprints mean the stored chunks are exactly what indexing would write
  now; anything else re-chunks and re-embeds.
- ``Batch`` collects documents across sources and files, embeds them in
  large calls per model and replaces their chunks.
- ``documents_describe``: with contextual retrieval on, each chunk first
  gets a contextual description (sources/contextual.py), kept in its
  metadata and prepended to its embedded text; one that cannot be written
  is counted, and its document is stored with an empty fingerprint so the
  next run tries again (cached descriptions cost nothing then).
- ``documents_replace`` swaps the chunks of whole documents in one
  transaction with one DELETE and one bulk INSERT: a search never sees half a
  document, and no statement runs per chunk.
- ``item_*``: the status lifecycle of skills and tools (queued -> running ->
  indexed or failed with the reason). Roots run as index jobs (jobs.py);
  datasets are indexed by the eval command.
"""

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from django.db import connection, transaction
from django.utils import timezone

from kernel import metrics
from kernel.errors import ApplicationError
from sources.chunking import ChunkResult, chunker_reads, strategy_identity
from sources.chunking.strategies import MAX_CHARS, OVERLAP
from sources.config import EmbeddingConfig, IndexingConfig, IngestSettings
from sources.contextual import ContextualConfig, DescriptionRequest, descriptions_get
from sources.embedding import EmbeddingError, embedder_for, model_reference
from sources.encoder_thread import BackgroundWork
from sources.extract import Anchor
from sources.file_texts import file_texts_store
from sources.models import (
    DESCRIPTION_KEY,
    Chunk,
    EmbeddingModel,
    IndexedFile,
    IndexStatus,
    Memory,
    Skill,
    Source,
    Tool,
    UploadedDocument,
)

# Words first: a write every this many chunks, or this many seconds after the last one, whichever comes first. Small
# enough that a new root's first files are searchable within seconds of the job reaching them; large enough that one
# INSERT (and its lexical trigger) serves many files.
WORDS_FLUSH_CHUNKS = 512
WORDS_FLUSH_SECONDS = 1.0

# What has one source and its index state on its own row (sources.models.Indexed).
ItemModel = type[Skill] | type[Tool] | type[UploadedDocument] | type[Memory]


class IndexingError(ApplicationError):
    """Indexing failed for a reason worth showing to the source's owner; retrying will not help."""


def content_hash(text: str) -> str:
    """The SHA-256 of a text as stored (a caller can check it against the file or skill it read)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def fingerprint(*, content: str, model: str, config: IngestSettings, chunker: str, extractor: str = "") -> str:
    """The one fingerprint of stored chunks: ``content``, the document's content hash; ``model``, the model's;
    ``chunker``, the identity of the strategy that chunks it (sources.chunking.chunker_identity, or
    strategy_identity for skills and one-chunk items); ``extractor``, the identity of the extractor a document's
    suffix calls for (sources/extract/), "" for text.

    Of the chunk settings only those the strategy reads join it: a skill ignores RAG_CHUNK_OVERLAP, a tool or a
    memory both, so changing them re-embeds nothing that would come out the same."""
    reads = chunker_reads(chunker)
    parts = [
        content,
        chunker,
        str(config.max_chars) if MAX_CHARS in reads else "",
        str(config.overlap) if OVERLAP in reads else "",
        config.long_texts,
        config.contextual,
        model,
    ]
    if extractor:  # only then: a text file's fingerprint has no empty part for it
        parts.append(extractor)
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
    chunker: str  # the identity of the strategy that made ``chunks`` (in the fingerprint; stored on each row)
    content_hash: str = ""
    fingerprint: str = ""
    # Files: the stat that lets the next pass skip them unread.
    size: int = 0
    mtime_ns: int = 0
    marker: str = ""  # a connector's change marker where a stat is not one (an ETag)
    # The document's text as its chunks cite it: a file's is stored for grep (sources/file_texts.py); contextual
    # descriptions read it (empty: its chunks joined).
    text: str = ""
    anchors: tuple[Anchor, ...] = ()  # a document's pages, slides or sheets, stored with its text
    vectors: np.ndarray | None = None
    undescribed: int = 0  # chunks whose contextual description could not be written
    # Words first (Batch(vectors_later=True)): stored without vectors of its own, each chunk pending its vector
    # (sources/pipeline/vectors.py) and meanwhile keeping the one of the chunk it replaces, if any.
    vectors_later: bool = False
    embedded_as: str = ""  # vector_identity of its model and settings: set by documents_embed or Batch.add
    # With ``vectors_later``: a chunk whose embedded text is unchanged keeps its vector and is not embedded again
    # (False for a forced job, which re-embeds everything). Set by documents_replace: how many were kept.
    reuse: bool = True
    reused: int = 0


def vector_identity(model: EmbeddingModel, config: IngestSettings) -> str:
    """What makes a chunk's vector what it is besides its text: the model and how long texts are embedded."""
    return hashlib.sha256(f"{model.spec.identity}\x1f{config.long_texts}".encode()).hexdigest()[:32]


def embedding_model_for(name: str = "", *, config: EmbeddingConfig) -> EmbeddingModel:
    """The row of a model named as a root, a segment or ``config.model`` names it (the default), with its HNSW index.

    ``api:<model>[@<dimensions>]`` is a model of the OpenAI-compatible API
    (sources/embedding/api.py); anything else a local model's name or path.
    A model that cannot be loaded or reached raises IndexingError. A local
    model's name carries ``config.backend`` (embedding/backends.py), or torch
    for a model ONNX cannot run: vectors of two backends are two models, so
    switching re-embeds instead of mixing.
    """
    try:
        provider, model_name = model_reference(name or config.model, backend=config.backend)
        spec = embedder_for(provider=provider, name=model_name, device=config.device).spec
    except EmbeddingError as exc:
        raise IndexingError(str(exc)) from exc
    model, created = EmbeddingModel.objects.get_or_create(
        provider=spec.provider, name=spec.name, dimensions=spec.dimensions, normalized=spec.normalized
    )
    if created:
        embedding_model_index_ensure(model=model, ef_construction=config.hnsw_ef_construction)
    return model


def embedding_model_index_ensure(*, model: EmbeddingModel, ef_construction: int) -> None:
    """A partial HNSW index per model on ``embedding::halfvec(N)``.

    One vector column holds every model's vectors; the cast to a fixed
    dimension plus the partial predicate is pgvector's documented way to
    index several dimensions in one table (halfvec halves the index size).
    ``ef_construction`` (RAG_HNSW_EF_CONSTRUCTION) is how well the graph
    links each vector, which sets recall at a given ef_search; pgvector's
    default ``m`` (16) is kept.
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
            f"WITH (ef_construction = {int(ef_construction)}) WHERE embedding_model_id = {int(model.pk)}"
        )
        if connection.in_atomic_block:
            # Deferred again for the rest of the transaction: a root and its
            # sources point at each other, and deleting both in one
            # transaction needs the checks at commit, not per statement.
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")


def embed_text(chunk: ChunkResult, path: str = "") -> str:
    return embedded_text(
        path=path,
        symbol=chunk.symbol,
        context_prefix=chunk.context_prefix,
        description=chunk.metadata.get(DESCRIPTION_KEY, ""),
        content=chunk.content,
    )


def embedded_text(*, path: str, symbol: str, context_prefix: str, description: str, content: str) -> str:
    """What the model embeds for a chunk (of a document being stored, or of a stored row waiting for its vector)."""
    # Path, symbol and heading path tell the model what the text is about;
    # the content alone often does not name its topic. The contextual
    # description, when there is one, says it in words.
    header = " · ".join(part for part in (path, symbol, context_prefix) if part)
    body = f"{description}\n\n{content}" if description else content
    return f"{header}\n\n{body}" if header else body


def documents_describe(
    documents: Sequence[Document], *, config: ContextualConfig, on_batch: Callable[[], None] | None = None
) -> int:
    """Give every chunk of ``documents`` its contextual description (cached or written now); returns how many got none.

    A document with a chunk left undescribed keeps an empty fingerprint: its
    stored chunks are not what indexing would write, so the next run does it
    again (asking only for the descriptions still missing).
    """
    requests: list[DescriptionRequest] = []
    for d in documents:
        text = d.text or "\n".join(chunk.content for chunk in d.chunks)
        digest = d.content_hash or content_hash(text)
        requests.extend(
            DescriptionRequest(document_hash=digest, path=d.path, document=text, chunk=chunk.content)
            for chunk in d.chunks
        )
    descriptions = iter(descriptions_get(requests, config=config, on_progress=on_batch))
    undescribed = 0
    for d in documents:
        chunks = []
        for chunk in d.chunks:
            description = next(descriptions)
            if description is None:
                d.undescribed += 1
                chunks.append(chunk)
            else:
                chunks.append(replace(chunk, metadata={**chunk.metadata, DESCRIPTION_KEY: description}))
        d.chunks = chunks
        if d.undescribed:
            d.fingerprint = ""
            undescribed += d.undescribed
    return undescribed


def documents_embed(
    documents: Sequence[Document],
    *,
    config: IndexingConfig,
    on_batch: Callable[[], None] | None = None,
    on_embedded: Callable[[int], None] | None = None,
) -> int:
    """Embed every chunk of ``documents``, in batches across documents, one call per model; sets ``vectors``.

    With contextual retrieval on, the chunks are described first; returns
    how many were left without a description. ``on_batch`` runs after each
    embedding batch (and description): a job beats its heart there, so one
    long embedding call never looks like a dead worker. ``on_embedded`` hears
    before that how many of the call's chunks are embedded so far (a job's
    progress moves within a call of a thousand chunks). A model that fails,
    or answers with vectors of another size than its row, raises
    IndexingError with its reason.
    """
    # The fingerprint's own settings decide the descriptions and long texts: what is stored is what it says.
    for d in documents:
        d.embedded_as = vector_identity(d.model, config.ingest)
    undescribed = (
        documents_describe(documents, config=config.contextual, on_batch=on_batch) if config.ingest.contextual else 0
    )
    documents_vectors_set(
        documents, documents_vectors(documents, config=config, on_batch=on_batch, on_embedded=on_embedded)
    )
    return undescribed


def documents_vectors(
    documents: Sequence[Document],
    *,
    config: IndexingConfig,
    on_batch: Callable[[], None] | None = None,
    on_embedded: Callable[[int], None] | None = None,
) -> dict[EmbeddingModel, np.ndarray]:
    """The vectors of every chunk of ``documents`` (descriptions already written), one call per model, in order.

    Reads no database and changes no row: Batch runs it on the encoder
    thread while the indexer reads on. Raises IndexingError.
    """
    chunking, embedding = config.ingest, config.embedding
    done = 0  # chunks of earlier models' groups
    found: dict[EmbeddingModel, np.ndarray] = {}
    for model, group in _by_model(documents).items():
        texts = [embed_text(chunk, d.path) for d in group for chunk in d.chunks]
        batches = 0

        def batch_done(before: int = done, size: int = len(texts)) -> None:
            nonlocal batches
            batches += 1
            if on_embedded is not None:
                # Counted in batches of texts: a long text embedded in pieces makes a batch cover fewer chunks.
                on_embedded(before + min(batches * embedding.batch_size, size))
            if on_batch is not None:
                on_batch()

        try:
            found[model] = embedder_for(provider=model.provider, name=model.name, device=embedding.device).embed(
                texts,
                batch_size=embedding.batch_size,
                pieces=chunking.long_texts == "pieces",
                on_batch=batch_done,
            )
        except EmbeddingError as exc:
            raise IndexingError(str(exc)) from exc
        done += len(texts)
    return found


def documents_vectors_set(documents: Sequence[Document], vectors: dict[EmbeddingModel, np.ndarray]) -> None:
    """Give each document its rows of ``documents_vectors``' answer, checked against its model's dimensions."""
    for model, group in _by_model(documents).items():
        found = vectors[model]
        count = sum(len(d.chunks) for d in group)
        if count and found.shape[1] != model.dimensions:
            # Never stored: the model's HNSW index and every query read N dimensions.
            raise IndexingError(
                f"the embedding model {model} answered with {found.shape[1]}-dimensional vectors, "
                f"but its row says {model.dimensions}; nothing was stored"
            )
        metrics.CHUNKS_EMBEDDED.labels(model=model.name).inc(count)
        offset = 0
        for d in group:
            d.vectors = found[offset : offset + len(d.chunks)]
            offset += len(d.chunks)


def _embedded(document: Document, kept: "_KeptVectors") -> list[tuple[np.ndarray | None, bool]]:
    """Each chunk's vector and whether it is pending: its own, or (words first) the one it keeps."""
    if document.vectors is not None:
        return [(vector, False) for vector in document.vectors]
    if not document.vectors_later:  # storing its chunks without vectors would lose them from vector search
        raise ValueError(f"{document.path or document.source.key} is stored before documents_embed embedded it")
    return kept.for_document(document)


class _KeptVectors:
    """The vectors of the chunks a words-first write replaces, read before they are deleted.

    A new chunk whose embedded text (content, symbol, heading path, description; the path is the same) is that of a
    replaced chunk of the same model keeps its vector, done; any other keeps the vector of the chunk that was at its
    position, pending its own: meaning search goes on finding an edited file while its new vectors are computed.
    """

    def __init__(self, documents: Sequence[Document]) -> None:
        self.exact: dict[tuple, np.ndarray] = {}
        self.at: dict[tuple, np.ndarray] = {}
        for (source_id, generation), paths in _by_position(documents).items():
            rows = Chunk.objects.filter(
                source_id=source_id, generation=generation, path__in=paths, embedding__isnull=False
            ).values_list(
                "path",
                "chunk_index",
                "embedding_model_id",
                "content_hash",
                "symbol",
                "context_prefix",
                "metadata",
                "embedding",
                "vector_pending",
                "embedded_as",
            )
            for path, index, model_id, digest, symbol, prefix, metadata, vector, pending, made in rows:
                place = (source_id, generation, path, model_id)
                if vector is None:
                    continue
                self.at[(*place, index)] = vector
                if not pending and made:
                    self.exact[(*place, made, digest, symbol, prefix, metadata.get(DESCRIPTION_KEY, ""))] = vector

    def for_document(self, d: Document) -> list[tuple[np.ndarray | None, bool]]:
        place = (d.source.pk, d.generation, d.path, d.model.pk)
        found: list[tuple[np.ndarray | None, bool]] = []
        for index, chunk in enumerate(d.chunks):
            key = (
                *place,
                d.embedded_as,
                content_hash(chunk.content),
                chunk.symbol,
                chunk.context_prefix,
                chunk.metadata.get(DESCRIPTION_KEY, ""),
            )
            same = self.exact.get(key) if d.reuse else None
            if same is not None:
                d.reused += 1
                found.append((same, False))
            else:
                found.append((self.at.get((*place, index)), True))
        return found


@transaction.atomic
def documents_replace(documents: Sequence[Document], *, track_files: bool) -> int:
    """Replace the chunks of ``documents``; returns how many rows were deleted.

    ``track_files``: also record each document's state (IndexedFile), which
    lets the next pass skip it; skills and tools keep theirs on their own row.
    A document with ``vectors_later`` is written without vectors of its own: its chunks wait for theirs
    (sources/pipeline/vectors.py), keeping those of the chunks they replace (``_KeptVectors``).
    """
    kept = _KeptVectors([d for d in documents if d.vectors is None and d.vectors_later])
    deleted = 0
    for (source_id, generation), paths in _by_position(documents).items():
        deleted += Chunk.objects.filter(source_id=source_id, generation=generation, path__in=paths).delete()[0]
    Chunk.objects.bulk_create(
        [
            Chunk(
                source=d.source,
                generation=d.generation,
                path=d.path,
                chunk_index=index,
                content=chunk.content,
                context_prefix=chunk.context_prefix,
                language=chunk.language,
                symbol=chunk.symbol,
                start_line=chunk.start_line,
                end_line=chunk.end_line,
                content_hash=content_hash(chunk.content),
                embedding=vector,
                vector_pending=pending,
                embedded_as="" if pending else d.embedded_as,
                embedding_model=d.model,
                chunking_version=d.chunker,
                metadata=chunk.metadata,
            )
            for d in documents
            for index, (chunk, (vector, pending)) in enumerate(zip(d.chunks, _embedded(d, kept), strict=True))
        ],
        batch_size=1000,
    )
    if track_files:
        file_texts_store(documents)
        IndexedFile.objects.bulk_create(
            [
                IndexedFile(
                    source=d.source,
                    generation=d.generation,
                    path=d.path,
                    size=d.size,
                    mtime_ns=d.mtime_ns,
                    marker=d.marker,
                    content_hash=d.content_hash,
                    fingerprint=d.fingerprint,
                    chunking_version=d.chunker,
                    embedding_model=d.model,
                    chunk_count=len(d.chunks),
                )
                for d in documents
            ],
            update_conflicts=True,
            unique_fields=["source", "generation", "path"],
            update_fields=[
                "size",
                "mtime_ns",
                "marker",
                "content_hash",
                "fingerprint",
                "chunking_version",
                "embedding_model",
                "chunk_count",
                "indexed_at",
            ],
        )
    return deleted


class Batch:
    """Documents collected across files and sources, embedded and stored once enough chunks wait.

    Big embedding calls pad less (the model sorts a call's texts by length):
    see RAG_INDEX_FLUSH_CHUNKS (``config.embedding.flush_chunks``, unless ``flush_chunks`` says otherwise).
    A flush that ``add`` starts embeds on the encoder thread (encoder_thread.py) while the caller reads on;
    the next flush waits for its vectors, starts its own, and writes the earlier one meanwhile. ``flush``
    returns with everything stored. A crash in between loses only what was not written yet, and nothing is
    recorded as indexed before its chunks are, so the next run embeds it again.
    """

    def __init__(
        self,
        *,
        track_files: bool,
        config: IndexingConfig,
        flush_chunks: int | None = None,
        on_batch: Callable[[], None] | None = None,
        on_embedded: Callable[[int], None] | None = None,
        vectors_later: bool = False,
    ) -> None:
        self.track_files = track_files
        self.config = config
        # Words first: documents are written without embedding, a few at a time (WORDS_FLUSH_CHUNKS, or
        # WORDS_FLUSH_SECONDS after the last write), searchable by their words at once; their vectors follow
        # (sources/pipeline/vectors.py).
        self.vectors_later = vectors_later
        self.written = 0  # chunks written (words first: searchable by words)
        self.to_embed = 0  # of those, chunks waiting for a vector of their own
        self.last_write = time.monotonic()
        self.flush_chunks = WORDS_FLUSH_CHUNKS if vectors_later else (flush_chunks or config.embedding.flush_chunks)
        self.on_batch = on_batch
        # Hears how many of the waiting chunks are embedded so far: 0 as a flush starts, then after each batch.
        self.on_embedded = on_embedded
        self.pending: list[Document] = []
        self.pending_chunks = 0
        self.running: _Embedding | None = None  # the flush embedding on the encoder thread
        self.embedded = 0
        self.deleted = 0
        self.undescribed = 0

    def add(self, document: Document) -> None:
        document.vectors_later = self.vectors_later
        document.embedded_as = vector_identity(document.model, self.config.ingest)
        self.pending.append(document)
        self.pending_chunks += len(document.chunks)
        if self.vectors_later:
            if self.pending_chunks >= self.flush_chunks or time.monotonic() - self.last_write >= WORDS_FLUSH_SECONDS:
                self._words_write()
        elif self.pending_chunks >= self.flush_chunks:
            self._flush(wait=False)

    def flush(self) -> None:
        """Embed and store everything added so far (words first: store it; its vectors follow)."""
        if self.vectors_later:
            self._words_write()
        else:
            self._flush(wait=True)

    def _words_write(self) -> None:
        documents, self.pending, self.pending_chunks = self.pending, [], 0
        self.last_write = time.monotonic()
        if not documents:
            return
        self.deleted += documents_replace(documents, track_files=self.track_files)
        chunks = sum(len(d.chunks) for d in documents)
        self.written += chunks
        self.to_embed += chunks - sum(d.reused for d in documents)

    def _flush(self, *, wait: bool) -> None:
        earlier, self.running = self.running, None
        if earlier is not None:
            self._vectors_wait(earlier)
        documents, chunks = self.pending, self.pending_chunks
        self.pending, self.pending_chunks = [], 0
        if documents and earlier is None and wait:
            # Nothing to write meanwhile: embed here, every batch heard as it ends.
            if self.on_embedded is not None:
                self.on_embedded(0)
            documents_embed(documents, config=self.config, on_batch=self.on_batch, on_embedded=self.on_embedded)
            self._write(_Embedding(documents, chunks, None))
            return
        if documents:
            self.running = self._start(documents, chunks)
        if earlier is not None:
            self._write(earlier)  # while the next flush embeds
        if wait and self.running is not None:
            last, self.running = self.running, None
            self._vectors_wait(last)
            self._write(last)

    def _start(self, documents: list[Document], chunks: int) -> "_Embedding":
        # Descriptions read and write their cache in the database: written here, before the thread starts.
        if self.config.ingest.contextual:
            documents_describe(documents, config=self.config.contextual, on_batch=self.on_batch)
        config = self.config

        def work(report: Callable[[int], None]) -> dict[EmbeddingModel, np.ndarray]:
            return documents_vectors(documents, config=config, on_embedded=report)

        return _Embedding(documents, chunks, BackgroundWork(work))

    def abandon(self) -> None:
        """The job stopped (cancelled, failed): the flush embedding on the encoder thread is dropped, unstored."""
        running, self.running = self.running, None
        if running is not None and running.work is not None:
            running.work.cancel()

    def _vectors_wait(self, embedding: "_Embedding") -> None:
        def heard(done: int) -> None:
            # The job's callbacks run on its own thread: they write its row.
            if self.on_embedded is not None:
                self.on_embedded(done)
            if self.on_batch is not None:
                self.on_batch()

        if self.on_embedded is not None:
            self.on_embedded(0)
        assert embedding.work is not None
        documents_vectors_set(embedding.documents, embedding.work.result(heard))

    def _write(self, embedding: "_Embedding") -> None:
        self.undescribed += sum(d.undescribed for d in embedding.documents)
        self.deleted += documents_replace(embedding.documents, track_files=self.track_files)
        self.embedded += embedding.chunks
        self.written += embedding.chunks


@dataclass(slots=True)
class _Embedding:
    documents: list[Document]
    chunks: int
    work: BackgroundWork[dict[EmbeddingModel, np.ndarray]] | None


def item_index_whole(item, *, source: Source, text: str, labels: dict, config: IndexingConfig) -> IndexOutcome | None:
    """Embed a one-chunk item (a tool, a memory: ``text`` whole, its chunk labelled by ``labels``: language,
    symbol, metadata) unless its fingerprint is unchanged; None if it was deleted meanwhile."""
    model = embedding_model_for(config=config.embedding)
    digest = content_hash(text)
    chunker = strategy_identity("whole")
    chunk = ChunkResult(content=text, context_prefix="", start_line=1, end_line=text.count("\n") + 1, **labels)
    document = Document(
        source=source,
        generation=source.active_generation,
        path="",
        chunks=[chunk],
        model=model,
        chunker=chunker,
        content_hash=digest,
        fingerprint=fingerprint(content=digest, model=model.spec.identity, config=config.ingest, chunker=chunker),
        text=text,
    )
    item_model = type(item)
    if document.fingerprint == item.fingerprint:
        item_unchanged(item_model, item.pk)
        return IndexOutcome(skipped=True)
    item_running(item_model, item.pk)
    deleted = item_store(item_model, item.pk, document, config=config)
    return None if deleted is None else IndexOutcome(skipped=False, chunks_embedded=1, chunks_deleted=deleted)


def item_unchanged(item_model: ItemModel, pk: int) -> None:
    """A skill or tool whose fingerprint matches: nothing to embed, and no old error to show."""
    item_model.objects.filter(pk=pk).update(index_status=IndexStatus.INDEXED, last_error="")


def item_running(item_model: ItemModel, pk: int) -> None:
    item_model.objects.filter(pk=pk).update(index_status=IndexStatus.RUNNING)


def item_failed(item_model: ItemModel, pk: int, reason: str) -> None:
    """The skill or tool keeps its previous chunks; the reason shows in the admin and the API."""
    item_model.objects.filter(pk=pk).update(index_status=IndexStatus.FAILED, last_error=reason[:2000])


def item_store(item_model: ItemModel, pk: int, document: Document, *, config: IndexingConfig, **fields) -> int | None:
    """Embed and store a skill's or tool's document, and record it indexed with ``fields``.

    Returns the chunks deleted, or None when the item was deleted meanwhile.
    The item's row lock serialises two workers indexing the same item.
    """
    documents_embed([document], config=config)
    # Stored all the same: a chunk without its description still serves; the next indexing describes it.
    note = (
        (
            f"indexed, but {document.undescribed} of {len(document.chunks)} chunks have no contextual description "
            "(the language model failed); the next indexing tries again"
        )
        if document.undescribed
        else ""
    )
    with transaction.atomic():
        if not item_model.objects.select_for_update().filter(pk=pk).exists():
            return None
        deleted = documents_replace([document], track_files=False)
        Source.objects.filter(pk=document.source.pk).update(embedding_model=document.model)
        item_model.objects.filter(pk=pk).update(
            content_hash=document.content_hash,
            fingerprint=document.fingerprint,
            indexed_at=timezone.now(),
            index_status=IndexStatus.INDEXED,
            last_error=note,
            **fields,
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
