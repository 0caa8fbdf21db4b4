"""The pipeline's second stage: vectors for the chunks written words first.

A job writes each file's chunks as soon as it has chunked them
(``ingest.Batch(vectors_later=True)``): they are searchable by their words
and exact text at once, marked ``vector_pending``. This stage then embeds the
pending chunks of the job's segments in batches (RAG_INDEX_FLUSH_CHUNKS) and
stores each batch's vectors in one UPDATE. The pending mark lives on the
rows, so the stage resumes where it stopped: after a cancel, a crash or a
worker's takeover the next job embeds only what is still pending, and a
chunk whose text did not change kept its vector when it was written again.

While a batch embeds on the encoder thread (encoder_thread.py) the next one
is read and the last one written, as the one-stage ``Batch`` does.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from django.db.models import Q

from kernel import metrics
from sources.config import IndexingConfig
from sources.embedding import EmbeddingError, embedder_for
from sources.encoder_thread import BackgroundWork
from sources.ingest import IndexingError, embedded_text, vector_identity
from sources.models import DESCRIPTION_KEY, Chunk, EmbeddingModel


@dataclass(frozen=True, slots=True)
class Position:
    """Where a job writes: a segment's source and generation, and the model its vectors come from."""

    source_id: int
    generation: int
    model: EmbeddingModel


@dataclass(slots=True)
class _Rows:
    model: EmbeddingModel
    ids: list[int]
    texts: list[str]


def pending_count(positions: list[Position], *, paths: list[str] | None = None) -> int:
    """How many chunks at ``positions`` (below ``paths`` when given) wait for their vector."""
    return _pending(positions, paths).count()


def vectors_fill(
    positions: list[Position],
    *,
    config: IndexingConfig,
    paths: list[str] | None = None,
    on_embedded: Callable[[int], None] | None = None,
    on_batch: Callable[[], None] | None = None,
) -> int:
    """Embed and store every pending chunk at ``positions`` (below ``paths``, for a targeted job); returns how many.

    ``on_embedded`` hears the running total after each model batch, ``on_batch`` runs then too (a job beats its
    heart there, and a cancelled job stops at it: what is stored stays). A model that fails raises IndexingError.
    """
    done = 0
    batches = _batches(positions, paths, size=config.embedding.flush_chunks)
    rows = next(batches, None)
    running: tuple[_Rows, BackgroundWork[np.ndarray]] | None = None
    started: tuple[_Rows, BackgroundWork[np.ndarray]] | None = None
    try:
        while rows is not None or running is not None:
            started = (rows, _start(rows, config=config)) if rows is not None else None
            rows = next(batches, None) if started is not None else None  # read while the encoder works
            if running is not None:
                earlier, work = running

                def heard(count: int, before: int = done) -> None:
                    if on_embedded is not None:
                        on_embedded(before + count)
                    if on_batch is not None:
                        on_batch()

                _store(earlier, work.result(heard), made=vector_identity(earlier.model, config.ingest))
                done += len(earlier.ids)
                if on_embedded is not None:
                    on_embedded(done)
            running, started = started, None
    except BaseException:
        # Cancelled (the heartbeat found the job no longer this worker's), failed or stopped: what is stored stays
        # and the rest stays pending; the encoder thread drops the batches nobody will store.
        for pending in (running, started):
            if pending is not None:
                pending[1].cancel()
        raise
    return done


def _pending(positions: list[Position], paths: list[str] | None):
    where = Q(pk__in=[])
    for p in positions:
        where |= Q(source_id=p.source_id, generation=p.generation)
    pending = Chunk.objects.filter(where, vector_pending=True)
    if paths:
        below = Q(path__in=paths)
        for path in paths:
            below |= Q(path__startswith=path.rstrip("/") + "/")
        pending = pending.filter(below)
    return pending


def _batches(positions: list[Position], paths: list[str] | None, *, size: int) -> Iterator[_Rows]:
    """The pending chunks, a model at a time, ``size`` per batch, by id (keyset: each read starts after the last)."""
    for position in positions:
        last = 0
        while True:
            rows = list(
                _pending([position], paths)
                .filter(pk__gt=last)
                .order_by("pk")
                .values_list("pk", "path", "symbol", "context_prefix", "metadata", "content")[:size]
            )
            if not rows:
                break
            last = rows[-1][0]
            yield _Rows(
                model=position.model,
                ids=[row[0] for row in rows],
                texts=[
                    embedded_text(
                        path=path,
                        symbol=symbol,
                        context_prefix=prefix,
                        description=(metadata or {}).get(DESCRIPTION_KEY, ""),
                        content=content,
                    )
                    for _, path, symbol, prefix, metadata, content in rows
                ],
            )


def _start(rows: _Rows, *, config: IndexingConfig) -> BackgroundWork[np.ndarray]:
    embedding, pieces = config.embedding, config.ingest.long_texts == "pieces"
    model = rows.model

    def work(report: Callable[[int], None]) -> np.ndarray:
        batches = 0

        def batch_done() -> None:
            nonlocal batches
            batches += 1
            report(min(batches * embedding.batch_size, len(rows.texts)))

        try:
            return embedder_for(provider=model.provider, name=model.name, device=embedding.device).embed(
                rows.texts, batch_size=embedding.batch_size, pieces=pieces, on_batch=batch_done
            )
        except EmbeddingError as exc:
            raise IndexingError(str(exc)) from exc

    return BackgroundWork(work)


def _store(rows: _Rows, vectors: np.ndarray, *, made: str) -> None:
    """One UPDATE for the batch: each row its vector, no longer pending (a row deleted meanwhile is simply gone)."""
    if len(rows.ids) and vectors.shape[1] != rows.model.dimensions:
        raise IndexingError(
            f"the embedding model {rows.model} answered with {vectors.shape[1]}-dimensional vectors, "
            f"but its row says {rows.model.dimensions}; nothing was stored"
        )
    Chunk.objects.bulk_update(
        [
            Chunk(pk=pk, embedding=vector, vector_pending=False, embedded_as=made)
            for pk, vector in zip(rows.ids, vectors, strict=True)
        ],
        ["embedding", "vector_pending", "embedded_as"],
        batch_size=1000,
    )
    metrics.CHUNKS_EMBEDDED.labels(model=rows.model.name).inc(len(rows.ids))
