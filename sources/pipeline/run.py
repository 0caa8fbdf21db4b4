"""The one indexing pipeline every connector feeds: a root's job from its items to its outcome.

The connector (sources/connectors/) lists the items and reads their bytes;
here: change detection against the stored ``IndexedFile`` rows (stat or
marker, then content hash and fingerprint), the one bytes -> chunks
function (sources/reading.py), embedding in batches across items
(``ingest.Batch``), renames, deletions, segments and generations (a new
model or a rewritten history is written beside the active generation and
flipped at the end), progress and heartbeat, cancel, takeover after a
crash (``jobs``), and the outcome.
"""

import logging
import time
from collections.abc import Callable
from dataclasses import replace

from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from kernel.errors import ApplicationError
from sources import jobs, locks
from sources.chunking import chunker_identity
from sources.config import IndexingConfig, indexing_config, jobs_config
from sources.connectors.base import KEPT, Item
from sources.connectors.registry import connector_for
from sources.file_texts import TextOnly, file_texts_delete, file_texts_present, file_texts_store
from sources.ingest import Batch, Document, fingerprint
from sources.job_report import job_facts
from sources.jobs import HandOff
from sources.models import Chunk, FileText, IndexedFile, IndexJob, JobStatus, Source, WorkspaceRoot
from sources.outcomes import job_outcome, reasons_count
from sources.pipeline.plans import SegmentPlan, segment_for, segment_plans
from sources.pipeline.vectors import (
    Position,
    pending_count,
    vectors_fill,
    vectors_plan,
    vectors_plan_reset,
    vectors_plan_written,
    vectors_stored,
)
from sources.progress import Phase
from sources.reading import Content, ReadRules, content_chunks, content_read, extractor_identity, reason_failed
from sources.walk import REPLACED, Skipped

log = logging.getLogger(__name__)

# Asks other worker processes to help embed a job's vector batches: (job id, how many helpers at most).
Helpers = Callable[[int, int], None]

_HEARTBEAT_SECONDS = 2.0
_TEXTS_PER_WRITE = 200  # texts stored alone (no embedding) are written in bulk, as the batch writes chunks


def root_index(*, job: IndexJob, config: IndexingConfig | None = None, helpers: Helpers | None = None) -> str:
    """Run a job claimed by ``jobs.job_start`` to its end, then release the root's lock.

    The job records its outcome before the lock goes, so no other worker
    ever sees it "running" with nobody holding it while this one is alive.
    Returns the job's final status. ``config``: built by the caller (the
    task), else from the settings now. ``helpers(job_id, count)``: asks up
    to ``count`` other worker processes to embed the job's vector batches
    too (the task sends Celery messages); None: this process embeds them all.
    """
    try:
        _Run(job, config or indexing_config(), helpers).run()
    except HandOff as handoff:
        # Back to the queue as a full job; the caller (the task) sends it to the bulk queue once the lock is free.
        IndexJob.objects.filter(pk=job.pk, status=JobStatus.RUNNING, worker=job.worker).update(
            status=JobStatus.QUEUED,
            worker="",
            paths=[],
            trigger=handoff.trigger,
            message=f"handed to the bulk queue: {handoff.reason}",
        )
        return JobStatus.QUEUED
    except ApplicationError as exc:
        jobs.job_finish(job_id=job.pk, status=JobStatus.FAILED, message=exc.message, job=job)
        return JobStatus.FAILED
    except Exception as exc:
        jobs.job_finish(
            job_id=job.pk, status=JobStatus.FAILED, message=f"unexpected error: {type(exc).__name__}: {exc}", job=job
        )
        raise
    finally:
        locks.root_lock_release(job.root_id)
    return JobStatus.SUCCEEDED


class _Run:
    """One job of one root: its connector's items through the pipeline, to the job's outcome."""

    def __init__(self, job: IndexJob, config: IndexingConfig, helpers: Helpers | None = None) -> None:
        self.job = job
        self.helpers = helpers
        # Words first with helpers: vector batches of RAG_INDEX_FLUSH_CHUNKS (never under one model batch) are
        # planned as chunks are written (written since ``vectors_above``, at ``planned_at`` chunks written); as
        # large as one embedding call, since they are in the order written and only the model sorts them by length.
        self.early = max(config.embedding.flush_chunks, config.embedding.batch_size)
        self.positions: list[Position] = []
        self.vectors_above = 0
        self.planned_at = 0
        self.root: WorkspaceRoot = job.root
        self.connector = connector_for(root=self.root, job=job, config=config)
        # Words first, vectors behind (sources/pipeline/vectors.py); with contextual descriptions, which are written
        # from the whole document before its chunks are stored, each batch is embedded before it is written.
        self.words_first = not config.ingest.contextual
        self.batch = Batch(
            track_files=True,
            config=config,
            on_batch=self._beat,
            on_embedded=self._embedding,
            vectors_later=self.words_first,
        )
        self.indexing = config
        self.embedding = config.embedding
        self.config = config.ingest
        self.touched: list[IndexedFile] = []
        self.last_beat = 0.0
        # A forced job re-embeds every file it has not stored itself: a run
        # taken over from a dead worker keeps what that attempt already did.
        self.forced_since = (job.started_at or timezone.now()) if job.force else None
        self.read_rules = ReadRules(
            max_chars=self.config.max_chars,
            overlap=self.config.overlap,
            limits=config.extract,
            scan_secrets=self.root.scan_secrets,
        )
        self.states: dict[tuple[int, int, str], IndexedFile] = {}
        self.moved: set[tuple[int, int, str]] = set()  # renamed files' former keys: their chunks went with them
        # Files with a stored text (sources/file_texts.py): one indexed before texts were stored is read once more
        # and its text stored, without embedding it again.
        self.texted: set[tuple[int, int, str]] = set()
        self.texts: list[TextOnly] = []

    def run(self) -> None:
        if (nothing := self.connector.prepare()) is not None:
            # Up to date: it ends without a phase, which is how its outcome tells it from a root with no files.
            jobs.job_finish(job_id=self.job.pk, status=JobStatus.SUCCEEDED, message=nothing, job=self.job)
            return
        try:
            self.connector.open()
            self._index()
        except BaseException:
            self.batch.abandon()  # its vectors would only keep the encoder thread from the next job
            raise
        finally:
            self.connector.close()

    def _index(self) -> None:
        root = self.root
        plans = segment_plans(root, self.embedding, rebuild=self.connector.rebuild)
        targeted = self._targeted(plans)
        files = IndexedFile.objects.filter(source__in=[p.source for p in plans])
        about = None
        if targeted:
            # Only what the job is about: a path, or (a directory, perhaps gone) the files below it.
            about = Q(path__in=targeted)
            for path in targeted:
                about |= Q(path__startswith=path + "/")
            files = files.filter(about)
        states = self.states = {(s.source_id, s.generation, s.path): s for s in files}
        self.texted = file_texts_present(sources=[p.source for p in plans], about=about)
        self.positions = [Position(plan.source.pk, plan.generation, plan.model) for plan in plans]
        if self.words_first:
            vectors_plan_reset(self.job.pk)  # a new attempt plans again from what is pending
            self.vectors_above = Chunk.objects.aggregate(top=Max("pk"))["top"] or 0  # what this run writes is above
        self.job.phase = Phase.LISTING
        self._beat(force=True)
        known = self._known(plans, states)
        entries = []
        for entry in self.connector.items(paths=targeted, known=known):
            entries.append(entry)
            self.job.files_total = len(entries)  # found so far, while the phase says listing
            self._beat()
        self.job.files_total = len(entries)
        self.job.phase = Phase.READING
        self._beat(force=True)
        kept: set[tuple[int, int, str]] = set()
        for entry in entries:
            self.job.files_seen += 1
            if isinstance(entry, Skipped):
                self._skip(entry)
            else:
                plan = segment_for(entry.path, plans)
                if self._consider(entry, plan, states.get((plan.source.pk, plan.generation, entry.path))):
                    kept.add((plan.source.pk, plan.generation, entry.path))
            self._beat()
        self._flush()
        # Gone files leave search now, not after the embedding.
        self._delete_missing(plans, states, kept | self.moved)
        if self.words_first:
            self._vectors(targeted)
        self.job.phase = Phase.FINISHING
        self._beat(force=True)
        self._flip(plans)
        self.connector.indexed()
        if not targeted:
            # A targeted job vouches for its paths only: the re-verify's schedule and cooldown go on as they were.
            WorkspaceRoot.objects.filter(pk=root.pk).update(last_verified_at=timezone.now())
        job = self.job
        job.left_out = dict(self.connector.left_out())
        outcome = job_outcome(job_facts(job, status=JobStatus.SUCCEEDED))
        assert outcome is not None  # a succeeded job always has one
        summary = self.connector.summary() + (f"targeted at {len(targeted)} path(s): " if targeted else "")
        summary += outcome.text
        jobs.job_finish(job_id=job.pk, status=JobStatus.SUCCEEDED, message=summary, job=job)

    def _targeted(self, plans: list[SegmentPlan]) -> list[str]:
        """The paths a targeted job reads; empty when the job (or what it must do) needs the whole root."""
        if not self.job.paths:
            return []
        if any(plan.rebuilding for plan in plans):
            return []  # a new model is written beside the old and flipped only once every file is in it
        if not self.connector.targeted():
            return []  # e.g. a folder that allows hard links: whether each is inside shows only after a whole walk
        return list(self.job.paths)

    def _fingerprint(self, digest: str, plan: SegmentPlan, path: str) -> str:
        """``path``: the item's reader name (``Connector.reader_name``)."""
        extractor = extractor_identity(path)
        return fingerprint(
            content=digest,
            model=plan.model.spec.identity,
            config=self.config,
            # Decided before an item is read, so an .html file counts as a page (whose identity covers a fragment's).
            chunker=chunker_identity(path, document=bool(extractor)),
            extractor=extractor,
        )

    def _current(self, state: IndexedFile | None, plan: SegmentPlan, name: str) -> bool:
        """Whether the stored chunks are what indexing the stored content would write now: the stored hash, read
        through today's chunker, settings and model, gives the stored fingerprint."""
        return (
            state is not None
            and state.fingerprint == self._fingerprint(state.content_hash, plan, name)
            and state.embedding_model_id == plan.model.pk
            and (self.forced_since is None or state.indexed_at >= self.forced_since)
        )

    def _known(self, plans: list[SegmentPlan], states: dict[tuple[int, int, str], IndexedFile]) -> dict[str, str]:
        """The stored marker of each item a connector may report unchanged: only where this run writes and the
        stored chunks are current (an item the connector does not read again is never one the run must re-embed)."""
        written = {(plan.source.pk, plan.generation): plan for plan in plans}
        known = {}
        for (source_id, generation, path), state in states.items():
            plan = written.get((source_id, generation))
            has_text = (source_id, generation, path) in self.texted
            if plan is not None and state.marker and has_text and segment_for(path, plans) is plan:
                if self._current(state, plan, self.connector.reader_name(path, state.marker)):
                    known[path] = state.marker
        return known

    def _consider(self, entry: Item, plan: SegmentPlan, state: IndexedFile | None) -> bool:
        """Queue the item if it changed; True when it stays in the index."""
        name = self.connector.reader_name(entry.path, entry.marker)
        current = self._current(state, plan, name)
        has_text = (plan.source.pk, plan.generation, entry.path) in self.texted
        if current and state is not None and has_text and _unchanged(state, entry):
            self.job.files_unchanged += 1  # not even read
            return True
        raw = self.connector.read(entry)
        if isinstance(raw, Skipped):
            self._skip(raw, failed=raw.reason.startswith("unreadable"))
            # Saved (replaced) while the job ran, or not fetched this time: keep what is stored, the next job reads it.
            return raw.reason in (REPLACED, KEPT) and state is not None
        content = content_read(raw, entry.path, self.read_rules, name=name)
        if isinstance(content, Skipped):
            self._skip(content, failed=reason_failed(content.reason))
            return False
        digest = content.digest
        if current and state is not None and state.content_hash == digest:
            if not has_text and not self._text_store(content, plan, entry.path):
                return False
            state.size, state.mtime_ns, state.marker = entry.size, entry.mtime_ns, entry.marker
            self.touched.append(state)  # saved in bulk at the next flush
            self.job.files_unchanged += 1  # touched, same content (a document is not extracted again)
            return True
        if state is None and self._moved(entry, plan, digest):
            return True
        chunked = content_chunks(content, self.read_rules)
        if isinstance(chunked, Skipped):
            self._skip(chunked, failed=reason_failed(chunked.reason))
            return False
        text, chunks = chunked.text, chunked.chunks
        if entry.metadata:
            # E.g. the commit each chunk was read at: hits, /context and the viewer show it and build the permalink.
            chunks = [replace(chunk, metadata={**chunk.metadata, **entry.metadata}) for chunk in chunks]
        self.job.files_changed += 1
        self.job.chunks_queued += len(chunks)  # words first: an estimate (unchanged chunks keep their vectors)
        self._store(
            Document(
                source=plan.source,
                generation=plan.generation,
                path=entry.path,
                chunks=chunks,
                model=plan.model,
                chunker=chunker_identity(name, document=content.document),  # what really chunked it, on each row
                content_hash=digest,
                fingerprint=self._fingerprint(digest, plan, name),
                size=entry.size,
                mtime_ns=entry.mtime_ns,
                marker=entry.marker,
                text=text,
                anchors=chunked.anchors,
                reuse=self.forced_since is None,  # a forced job embeds every chunk again
            )
        )
        return True

    def _text_store(self, content: Content, plan: SegmentPlan, path: str) -> bool:
        """Queue the text of a current file that has none stored yet (indexed before texts were); False when it
        cannot be read now (a document extracted again may fail)."""
        chunked = content_chunks(content, self.read_rules) if content.document else None
        if isinstance(chunked, Skipped):
            self._skip(chunked, failed=reason_failed(chunked.reason))
            return False
        text, anchors = (chunked.text, chunked.anchors) if chunked is not None else (content.text, ())
        self.texts.append(TextOnly(plan.source, plan.generation, path, text, anchors))
        if len(self.texts) >= _TEXTS_PER_WRITE:
            file_texts_store(self.texts)
            self.texts = []
        return True

    def _moved(self, entry: Item, plan: SegmentPlan, digest: str) -> bool:
        """An item renamed (by git) with its content unchanged: its chunks and vectors move to the new path, nothing
        is embedded. False when it was not renamed, or its former state is not what indexing it now would write."""
        former = self.connector.renamed_from(entry.path)
        key = (plan.source.pk, plan.generation, former or "")
        old = self.states.get(key) if former else None
        if (
            old is None
            or old.content_hash != digest
            or old.fingerprint != self._fingerprint(digest, plan, self.connector.reader_name(entry.path, entry.marker))
            or old.embedding_model_id != plan.model.pk
            or self.forced_since is not None
        ):
            return False
        with transaction.atomic():
            chunks = list(Chunk.objects.filter(source_id=key[0], generation=key[1], path=former).only("pk", "metadata"))
            for chunk in chunks:
                chunk.path = entry.path
                chunk.metadata = {**chunk.metadata, **entry.metadata}
            Chunk.objects.bulk_update(chunks, ["path", "metadata"], batch_size=1000)
            IndexedFile.objects.filter(pk=old.pk).update(
                path=entry.path, size=entry.size, mtime_ns=entry.mtime_ns, marker=entry.marker
            )
            file_texts_delete(source_id=key[0], generation=key[1], paths=[entry.path])
            FileText.objects.filter(source_id=key[0], generation=key[1], path=former).update(path=entry.path)
        self.moved.add(key)
        self.job.files_changed += 1
        return True

    def _store(self, document: Document | None) -> None:
        """Add the document to the batch (None: store what waits now); the job counts what was written."""
        deleted, undescribed = self.batch.deleted, self.batch.undescribed
        if document is None:
            self.batch.flush()
        else:
            self.batch.add(document)
        if self.job.phase == Phase.EMBEDDING:
            self.job.phase = Phase.READING  # the batch is stored; back to the files (or on to finishing)
        # Every chunk this run embedded goes through its one batch (a new attempt starts both at zero); words first,
        # its vector batches count them.
        if not self.words_first:
            self.job.chunks_embedded = self.batch.embedded
        self.job.chunks_written = self.batch.written
        self.job.chunks_deleted += self.batch.deleted - deleted
        self.job.chunks_undescribed += self.batch.undescribed - undescribed
        if self.words_first and self.helpers is not None and self.batch.written >= self.planned_at + self.early:
            self._vectors_early()

    def _vectors_early(self) -> None:
        """Vector batches for the chunks written so far, sent to the other bulk processes while this one reads on:
        with several processes (or a GPU), the encoder starts before the last file is read."""
        self.planned_at = self.batch.written
        batches, self.vectors_above = vectors_plan_written(
            self.job.pk, self.positions, above=self.vectors_above, size=self.early
        )
        if batches:
            assert self.helpers is not None  # only called with helpers
            self.helpers(self.job.pk, batches)
            self.job.chunks_embedded = vectors_stored(self.job.pk)

    def _vectors(self, targeted: list[str]) -> None:
        """The second stage: vectors for every chunk still pending in the segments this run writes (those it wrote,
        and those an earlier run left, cancelled or crashed); a targeted job only for its paths. The chunks are
        split into batches that this process and the helpers it sends embed together (pipeline/vectors.py); those
        planned while it read may be done already."""
        self.job.phase = Phase.EMBEDDING
        stored = vectors_stored(self.job.pk)
        self.job.chunks_queued = pending_count(self.positions, paths=targeted or None) + stored
        self.job.chunks_embedded = stored
        self._beat(force=True)
        batches = vectors_plan(
            self.job.pk,
            self.positions,
            paths=targeted or None,
            size=self.embedding.flush_chunks,
            least=self.embedding.batch_size,
        )
        if batches > 1 and self.helpers is not None:
            self.helpers(self.job.pk, batches - 1)  # the first is this process's own

        def embedded(done: int) -> None:
            self.job.chunks_embedded = done

        vectors_fill(
            self.job.pk,
            config=self.indexing,
            wait=True,
            stale_seconds=jobs_config().stale_seconds,
            on_embedded=embedded,
            on_batch=self._beat,
        )
        self._beat(force=True)

    def _embedding(self, done: int) -> None:
        """The batch's embedding call has embedded ``done`` of the chunks waiting (the beat follows)."""
        self.job.phase = Phase.EMBEDDING
        self.job.chunks_embedded = self.batch.embedded + done

    def _flush(self) -> None:
        self._store(None)
        file_texts_store(self.texts)
        self.texts = []
        if self.touched:
            IndexedFile.objects.bulk_update(self.touched, ["size", "mtime_ns", "marker"], batch_size=1000)
            self.touched = []
        self._beat(force=True)

    def _skip(self, skipped: Skipped, *, failed: bool = False) -> None:
        # Counted by the kind of reason, never with the path: every viewer of the job reads the counts, while a
        # skipped file's path and reason are shown only to those who may see its segment (surfaces/admin/roots.py).
        if failed:
            self.job.files_failed += 1
            self.job.failed_by_reason = reasons_count(self.job.failed_by_reason, skipped.reason)
        else:
            self.job.files_skipped += 1
            self.job.skipped_by_reason = reasons_count(self.job.skipped_by_reason, skipped.reason)
        if len(self.job.errors) < jobs.MAX_ERRORS_KEPT:
            self.job.errors.append({"path": skipped.path, "reason": skipped.reason})

    def _delete_missing(self, plans: list[SegmentPlan], states: dict, kept: set) -> None:
        """Files gone, now excluded or now unreadable lose their chunks."""
        written = {(p.source.pk, p.generation) for p in plans}
        gone: dict[tuple[int, int], list[str]] = {}
        for key in states:
            if key not in kept and key[:2] in written:
                gone.setdefault(key[:2], []).append(key[2])
        with transaction.atomic():
            for (source_id, generation), paths in gone.items():
                self.job.chunks_deleted += Chunk.objects.filter(
                    source_id=source_id, generation=generation, path__in=paths
                ).delete()[0]
                IndexedFile.objects.filter(source_id=source_id, generation=generation, path__in=paths).delete()
                file_texts_delete(source_id=source_id, generation=generation, paths=paths)
                self.job.files_deleted += len(paths)

    def _flip(self, plans: list[SegmentPlan]) -> None:
        """Make each segment's written generation the one searches read, atomically."""
        for plan in plans:
            with transaction.atomic():
                Source.objects.filter(pk=plan.source.pk).update(
                    active_generation=plan.generation, embedding_model=plan.model
                )
                if plan.rebuilding:
                    Chunk.objects.filter(source=plan.source, generation__lt=plan.generation).delete()
                    IndexedFile.objects.filter(source=plan.source, generation__lt=plan.generation).delete()
                    FileText.objects.filter(source=plan.source, generation__lt=plan.generation).delete()

    def _beat(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.last_beat >= _HEARTBEAT_SECONDS:
            self.job.left_out = dict(self.connector.left_out())
            jobs.job_progress(self.job)
            self.last_beat = now


def _unchanged(state: IndexedFile, item: Item) -> bool:
    """The item's change marker is the stored one: its marker when it has one, else its size and mtime."""
    if item.marker:
        return state.marker == item.marker
    return (state.size, state.mtime_ns, state.marker) == (item.size, item.mtime_ns, "")
