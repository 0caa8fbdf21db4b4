"""The pipeline's second stage: vectors for the chunks written words first, embedded by every bulk worker.

A job writes each file's chunks as soon as it has chunked them
(``ingest.Batch(vectors_later=True)``): they are searchable by their words
and exact text at once, marked ``vector_pending``. This stage then splits
the pending chunks of the job's segments into batches of
RAG_INDEX_FLUSH_CHUNKS (``vectors_plan``, one ``VectorBatch`` row each) that
any bulk worker process, on this machine or another sharing the broker and
database, claims and embeds (``vectors_fill``): the job's own process, and
the helpers it sends through Celery (``sources.tasks.vectors_batch_task``).
With helpers, batches of the chunks written so far are planned while the
job still reads (``vectors_plan_written``), so the encoder starts before the
last file is read.

A claim is the batch's session advisory lock (sources/locks.py): a worker
that dies loses it with its session and the batch is claimed again at once;
one that hangs is ended by the job after RAG_JOB_STALE_SECONDS without a
sign of progress, as a hung job is. Vectors are stored by the lock's holder
only, in the transaction that marks the batch done, so no batch enters the
index twice. The pending mark lives on the rows, so the stage resumes where
it stopped: after a cancel, a crash or a takeover the next attempt plans
again from what is still pending, and a chunk whose text did not change
kept its vector when it was written again.

While a batch embeds on the encoder thread (encoder_thread.py) the next one
is claimed and read and the last one stored, as the one-stage ``Batch`` does.
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from itertools import chain

import numpy as np
from django.db import DatabaseError, transaction
from django.db.models import Q, Sum
from django.db.models.functions import Length
from django.utils import timezone

from kernel import metrics
from sources import locks
from sources.chunk_vectors import chunk_vectors_store
from sources.config import IndexingConfig
from sources.embedding import EmbeddingError, embedder_for
from sources.encoder_thread import BackgroundWork
from sources.ingest import IndexingError, embedded_text, vector_identity
from sources.jobs import worker_name
from sources.models import DESCRIPTION_KEY, Chunk, EmbeddingModel, IndexJob, JobStatus, VectorBatch

log = logging.getLogger(__name__)

# A job's pending chunks make at least this many batches (when they fill a model batch each), so several worker
# processes share even a small job, and the one that finishes last waits for little.
MIN_BATCHES = 16
POLL_SECONDS = 0.2  # how often the job looks at batches other workers hold, once none is left to claim
_BEAT_SECONDS = 2.0  # a claimer shows it is alive at most this often (after each model batch)


@dataclass(frozen=True, slots=True)
class Position:
    """Where a job writes: a segment's source and generation, and the model its vectors come from."""

    source_id: int
    generation: int
    model: EmbeddingModel


@dataclass(slots=True)
class _Rows:
    batch_id: int
    model: EmbeddingModel
    ids: list[int]
    texts: list[str]


def pending_count(positions: list[Position], *, paths: list[str] | None = None) -> int:
    """How many chunks at ``positions`` (below ``paths`` when given) wait for their vector."""
    return _pending(positions, paths).count()


def vectors_plan_reset(job_id: int) -> None:
    """Drop an earlier attempt's batches: what they stored is no longer pending, what they did not is planned
    again (a helper still embedding one of them finds it gone and stores nothing)."""
    VectorBatch.objects.filter(job_id=job_id).delete()


def vectors_plan(
    job_id: int, positions: list[Position], *, paths: list[str] | None = None, size: int, least: int = 1
) -> int:
    """Split the pending chunks at ``positions`` (below ``paths``) that no batch of the job holds yet into
    batches; returns how many.

    Longest first, so a batch's texts are alike in length (the model pads each of its batches to the longest) and
    the last batches, which workers finish at different times, are the quickest. A batch holds ``size`` chunks
    (RAG_INDEX_FLUSH_CHUNKS), fewer when that would make fewer than MIN_BATCHES for the processes to share, but
    never fewer than ``least`` (one model batch, RAG_EMBED_BATCH_SIZE).
    """
    planned = set(chain.from_iterable(VectorBatch.objects.filter(job_id=job_id).values_list("chunk_ids", flat=True)))
    batches = []
    for position in positions:
        pending = _pending([position], paths).annotate(chars=Length("content"))
        ids = [pk for pk in pending.order_by("-chars", "pk").values_list("pk", flat=True) if pk not in planned]
        share = max(least, min(size, -(-len(ids) // MIN_BATCHES)))
        batches += [(position, ids[start : start + share]) for start in range(0, len(ids), share)]
    return _batches_create(job_id, batches)


def vectors_plan_written(job_id: int, positions: list[Position], *, above: int, size: int) -> tuple[int, int]:
    """Batches of ``size`` for the chunks written since chunk id ``above`` (while the job still reads, so other
    workers embed them meanwhile); a remainder short of a batch waits for the next call or ``vectors_plan``.
    Returns how many batches, and the id to pass as ``above`` next time."""
    batches = []
    for position in positions:
        ids = list(_pending([position], None).filter(pk__gt=above).order_by("pk").values_list("pk", flat=True))
        whole = len(ids) - len(ids) % size
        batches += [(position, ids[start : start + size]) for start in range(0, whole, size)]
    if batches:
        above = max(ids[-1] for _, ids in batches)
    return _batches_create(job_id, batches), above


def _batches_create(job_id: int, batches: list[tuple[Position, list[int]]]) -> int:
    VectorBatch.objects.bulk_create(
        [
            VectorBatch(
                job_id=job_id,
                source_id=position.source_id,
                generation=position.generation,
                model=position.model,
                chunk_ids=ids,
            )
            for position, ids in batches
        ],
        batch_size=500,
    )
    return len(batches)


@dataclass(frozen=True, slots=True)
class BatchesProgress:
    """A job's vector batches as its page shows them: how many, how many done, by how many worker processes, and
    how many are being embedded now."""

    total: int
    done: int
    workers: int
    working: int


def vectors_batches_progress(job_id: int) -> BatchesProgress:
    """One query over the job's batches (sources/pipeline/vectors.py)."""
    rows = list(VectorBatch.objects.filter(job_id=job_id).values_list("done_at", "worker"))
    return BatchesProgress(
        total=len(rows),
        done=sum(1 for done_at, _ in rows if done_at is not None),
        workers=len({worker for _, worker in rows if worker}),
        working=len({worker for done_at, worker in rows if worker and done_at is None}),
    )


def vectors_stored(job_id: int) -> int:
    """Vectors the job's batches stored so far, whoever embedded them."""
    return VectorBatch.objects.filter(job_id=job_id).aggregate(total=Sum("stored"))["total"] or 0


def vectors_fill(
    job_id: int,
    *,
    config: IndexingConfig,
    wait: bool = False,
    stale_seconds: int = 300,
    on_embedded: Callable[[int], None] | None = None,
    on_batch: Callable[[], None] | None = None,
) -> int:
    """Claim, embed and store the job's batches until none is left to claim; returns how many vectors this process
    stored.

    ``wait`` (the job's own process): then wait until every batch is done, claiming any whose worker died and
    ending the session of one that made no progress for ``stale_seconds``. ``on_embedded`` hears the job's running
    total, ``on_batch`` runs after each model batch and while waiting (a job beats its heart there, and a cancelled
    job stops at it: what is stored stays). A model that fails raises IndexingError.
    """
    claims = _Claims(job_id)
    done = 0
    running: tuple[_Rows, BackgroundWork[np.ndarray]] | None = None
    started: tuple[_Rows, BackgroundWork[np.ndarray]] | None = None
    try:
        while True:
            rows = claims.next()
            started = (rows, _start(rows, config=config)) if rows is not None else None  # embeds while we store
            if running is not None:
                earlier, work = running
                before = vectors_stored(job_id) if on_embedded is not None else 0

                def heard(count: int, before: int = before) -> None:
                    claims.beat()
                    if on_embedded is not None:
                        on_embedded(before + count)
                    if on_batch is not None:
                        on_batch()

                vectors = work.result(heard)
                done += _store(earlier, vectors, made=vector_identity(earlier.model, config.ingest))
                claims.release(earlier.batch_id)
                if on_embedded is not None:
                    on_embedded(vectors_stored(job_id))
            running, started = started, None
            if running is None:
                if not wait or claims.all_done():
                    break
                # Every batch left is another worker's: look again soon, and take over one whose worker hangs.
                if on_batch is not None:
                    on_batch()
                if on_embedded is not None:
                    on_embedded(vectors_stored(job_id))
                claims.hung_end(stale_seconds)
                time.sleep(POLL_SECONDS)
        if on_embedded is not None:
            on_embedded(vectors_stored(job_id))  # the last batches other workers stored while this one looked
    except BaseException:
        # Cancelled (the heartbeat found the job no longer this worker's), failed or stopped: what is stored stays
        # and the rest stays pending; the encoder thread drops the batches nobody will store.
        for pending in (running, started):
            if pending is not None:
                pending[1].cancel()
        raise
    finally:
        claims.release_all()
    return done


class _Claims:
    """The batches of one job this process holds (their locks), and how it claims the next."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        self.held: set[int] = set()
        self.worker = worker_name()
        self.last_beat = 0.0

    def next(self) -> _Rows | None:
        """Claim the first batch not done that no live worker holds, and read its chunks; None when there is none."""
        if not IndexJob.objects.filter(pk=self.job_id, status=JobStatus.RUNNING).exists():
            return None  # cancelled, failed or taken over meanwhile: nothing more to do for it
        open_batches = VectorBatch.objects.filter(job_id=self.job_id, done_at__isnull=True)
        for batch_id in open_batches.exclude(pk__in=self.held).order_by("pk").values_list("pk", flat=True):
            if not locks.batch_lock_try(batch_id):
                continue
            claimed = open_batches.filter(pk=batch_id).select_related("model").first()
            if claimed is None:  # done (or dropped by a new attempt's plan) between the listing and the lock
                locks.batch_lock_release(batch_id)
                continue
            self.held.add(batch_id)
            VectorBatch.objects.filter(pk=batch_id).update(
                worker=self.worker, beat_at=timezone.now(), attempts=claimed.attempts + 1
            )
            return _read(claimed)
        return None

    def beat(self) -> None:
        now = time.monotonic()
        if self.held and now - self.last_beat >= _BEAT_SECONDS:
            VectorBatch.objects.filter(pk__in=self.held).update(beat_at=timezone.now())
            self.last_beat = now

    def all_done(self) -> bool:
        return not VectorBatch.objects.filter(job_id=self.job_id, done_at__isnull=True).exists()

    def hung_end(self, stale_seconds: int) -> None:
        """End the database session of a worker whose batch made no progress for ``stale_seconds`` (its lock goes
        with it, so the batch is claimed again); a dead worker's session is gone already."""
        cutoff = timezone.now() - timedelta(seconds=stale_seconds)
        stale = VectorBatch.objects.filter(job_id=self.job_id, done_at__isnull=True, beat_at__lt=cutoff)
        for batch_id, worker in stale.exclude(pk__in=self.held).values_list("pk", "worker"):
            holder = locks.batch_lock_holder(batch_id)
            if holder is None:
                continue
            log.warning(
                "vector batch %s: its worker (%s) made no progress for %s s; ending its session",
                batch_id,
                worker,
                stale_seconds,
            )
            try:
                locks.backend_terminate(holder)
            except DatabaseError as exc:
                log.warning("vector batch %s: could not end the session of its hung worker: %s", batch_id, exc)

    def release(self, batch_id: int) -> None:
        if batch_id in self.held:
            self.held.discard(batch_id)
            locks.batch_lock_release(batch_id)

    def release_all(self) -> None:
        for batch_id in list(self.held):
            self.release(batch_id)


def _read(batch: VectorBatch) -> _Rows:
    """The batch's chunks still pending (one deleted or embedded meanwhile is left out), as the model reads them."""
    rows = list(
        Chunk.objects.filter(pk__in=batch.chunk_ids, vector_pending=True)
        .order_by("pk")
        .values_list("pk", "path", "symbol", "context_prefix", "metadata", "content")
    )
    return _Rows(
        batch_id=batch.pk,
        model=batch.model,
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


def _store(rows: _Rows, vectors: np.ndarray, *, made: str) -> int:
    """One UPDATE for the batch, and the batch marked done, in one transaction; returns how many vectors went in.

    Only while this session holds the batch's lock: a worker whose session was ended (hung, or its connection
    lost) finds the batch another's and stores nothing (a row deleted meanwhile is simply gone).
    """
    if len(rows.ids) and vectors.shape[1] != rows.model.dimensions:
        raise IndexingError(
            f"the embedding model {rows.model} answered with {vectors.shape[1]}-dimensional vectors, "
            f"but its row says {rows.model.dimensions}; nothing was stored"
        )
    with transaction.atomic():
        batch = VectorBatch.objects.select_for_update().filter(pk=rows.batch_id, done_at__isnull=True).first()
        if batch is None or locks.batch_lock_holder(rows.batch_id) != locks.backend_pid():
            log.warning(
                "vector batch %s was taken over or dropped before it was stored; its vectors are not kept",
                rows.batch_id,
            )
            return 0
        chunk_vectors_store(ids=rows.ids, vectors=vectors, embedded_as=made)
        VectorBatch.objects.filter(pk=rows.batch_id).update(done_at=timezone.now(), stored=len(rows.ids))
    metrics.CHUNKS_EMBEDDED.labels(model=rows.model.name).inc(len(rows.ids))
    return len(rows.ids)
