"""Indexing a workspace root: walk, compare with stored state, embed what
changed in batches across files, delete what disappeared.

A root is pinned to its directory (device and inode) when it is saved: a
job, read, grep or the viewer that finds its path leading elsewhere (a
symlink swapped in, the directory replaced) refuses it, and the job also
withdraws its chunks.
"""

import logging
import os
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import pathspec
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from kernel.errors import ApplicationError, Conflict
from sources import git_roots, jobs, locks
from sources.config import EmbeddingConfig, IndexingConfig, indexing_config, root_base_dirs
from sources.git import SUBMODULE_REASON
from sources.ingest import Batch, Document, embedding_model_for, fingerprint
from sources.job_report import job_facts
from sources.models import (
    COMMIT_KEY,
    Chunk,
    EmbeddingModel,
    IndexedFile,
    IndexJob,
    JobStatus,
    Segment,
    Source,
    WorkspaceRoot,
    source_key,
    words,
)
from sources.outcomes import job_outcome, reasons_count
from sources.progress import Phase
from sources.reading import ReadRules, content_chunks, content_read, extractor_identity, reason_failed
from sources.walk import (
    REPLACED,
    Candidate,
    Skipped,
    WalkRules,
    read_bytes,
    root_open,
    walk,
    walk_paths,
)

log = logging.getLogger(__name__)

_HEARTBEAT_SECONDS = 2.0


@dataclass(slots=True)
class SegmentPlan:
    source: Source
    glob: str  # "" for the root's default segment
    matcher: pathspec.PathSpec | None
    model: EmbeddingModel
    generation: int  # where this run writes
    rebuilding: bool  # a new model: written beside the active generation, flipped at the end


def root_path_validate(path: str, *, base_dirs: Sequence[str] | None = None) -> str:
    """The real path of a directory allowed as a root (under ``base_dirs``, default RAG_ROOT_BASE_DIRS), or a clear
    error."""
    if not os.path.isabs(path):
        raise ApplicationError(f"{path!r} is not an absolute path")
    real = os.path.realpath(path)
    if not os.path.isdir(real):
        raise ApplicationError(f"{path!r} is not an existing directory")
    allowed = root_base_dirs() if base_dirs is None else base_dirs
    if not any(os.path.commonpath([real, base]) == base for base in allowed):
        raise ApplicationError(
            f"{real!r} is outside the allowed base directories ({', '.join(allowed)}; RAG_ROOT_BASE_DIRS)"
        )
    return real


class PinnedRoot(Protocol):
    """What checking a root's directory reads: a WorkspaceRoot, or a copy of these fields."""

    @property
    def name(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def directory_identity(self) -> str: ...
    @property
    def symlink_target(self) -> str: ...


class RootChanged(Conflict):
    """The root's path leads to another directory than the one pinned, or through a symlink nobody confirmed."""


@dataclass(frozen=True, slots=True)
class RootPin:
    """What saving a root records: its path, the directory's identity, and the target of a confirmed symlink."""

    path: str
    directory_identity: str  # "device:inode"
    symlink_target: str  # "" unless the path passes through a symlink an admin confirmed


def root_pin(*, path: str, confirm: bool, pinned: WorkspaceRoot | None = None) -> RootPin:
    """The pin for a root saved with ``path``: the directory it leads to now, or a clear error.

    Refused, unless ``confirm`` (the admin's "pin what it leads to now"), when
    the path passes through a symlink, or when ``pinned`` (the saved root, same
    path) was pinned to another directory: a swap must never be saved by
    someone editing the root's channels.
    """
    real = root_path_validate(path)
    configured = os.path.normpath(path)
    symlinked = real != configured
    try:
        fd = root_open(real)
    except OSError as exc:
        raise ApplicationError(f"{real!r} changed while it was checked ({exc.strerror or exc}); try again") from None
    try:
        identity = _identity(os.fstat(fd))
    finally:
        os.close(fd)
    pin = RootPin(configured if symlinked else real, identity, real if symlinked else "")
    if confirm:
        return pin
    # The root as pinned before, when it was pinned at this path.
    known = pinned
    if known is None or known.pk is None or known.path != pin.path or not known.directory_identity:
        known = None
    if symlinked and not (known and (known.symlink_target, known.directory_identity) == (real, identity)):
        raise ApplicationError(
            f"{path!r} passes through a symlink (it leads to {real!r} now): enter the real path, or "
            "confirm to pin the directory the symlink leads to now"
        )
    if known and known.directory_identity != identity:
        raise ApplicationError(
            f"{path!r} leads to another directory than the one pinned ({_described(identity)} now, "
            f"{_described(known.directory_identity)} when pinned): it was moved or replaced. Confirm "
            "to pin the directory it leads to now"
        )
    return pin


def root_directory_open(*, root: PinnedRoot) -> tuple[int, str]:
    """A descriptor of the root's directory, still the one pinned, and its identity ("device:inode").

    Raises RootChanged when the path now passes through a symlink no admin
    confirmed or leads to another directory than the pinned one, ApplicationError
    when it is not a directory under RAG_ROOT_BASE_DIRS, OSError when it
    changed while it was opened. An unpinned root (saved before pinning
    existed) is opened when its path passes through no symlink.
    """
    real = root_path_validate(root.path)
    if real != os.path.normpath(root.path) and real != root.symlink_target:
        confirmed = f", not to {root.symlink_target} as confirmed" if root.symlink_target else ""
        raise RootChanged(
            f"root {root.name!r} is no longer the directory it was pinned to: its path {root.path} passes "
            f"through a symlink (it leads to {real} now{confirmed}). An admin must confirm the root on "
            "its page before it is read again",
            details={"root": root.name},
        )
    fd = root_open(real)  # through no symlink: what the checks above saw is what is opened, or OSError
    identity = _identity(os.fstat(fd))
    if root.directory_identity and identity != root.directory_identity:
        os.close(fd)
        raise RootChanged(
            f"root {root.name!r} is no longer the directory it was pinned to: {root.path} leads to another "
            f"directory now ({_described(identity)}; pinned: {_described(root.directory_identity)}), moved "
            "or replaced. An admin must confirm the root on its page before it is read again",
            details={"root": root.name},
        )
    return fd, identity


def root_directory_check(*, root: WorkspaceRoot) -> int:
    """The root's directory descriptor for a job, checked again now; an unpinned root is pinned here.

    A root checked only when it was saved could since have been replaced by
    a symlink or another directory (or RAG_ROOT_BASE_DIRS narrowed). Such a
    root is refused before anything is read, and its stored chunks are
    deleted: what it served can no longer be vouched for.
    """
    if not os.path.isdir(root.path):
        # Perhaps a volume not mounted yet: the job fails, the index stays.
        raise ApplicationError(f"the root directory {root.path!r} does not exist or is not a directory")
    try:
        fd, identity = root_directory_open(root=root)
    except RootChanged as exc:
        raise _withdrawn(root, exc.message) from None
    except ApplicationError as exc:
        raise _withdrawn(
            root,
            f"{exc.message}. The root {root.name!r} ({root.path}) was moved or replaced by a "
            "symlink, or RAG_ROOT_BASE_DIRS changed, since it was registered",
        ) from None
    except OSError as exc:
        raise ApplicationError(
            f"the root directory {root.path!r} changed while the job started ({exc.strerror or exc}); nothing was read"
        ) from None
    if not root.directory_identity:
        WorkspaceRoot.objects.filter(pk=root.pk, directory_identity="").update(directory_identity=identity)
        root.directory_identity = identity
    return fd


def _withdrawn(root: WorkspaceRoot, reason: str) -> ApplicationError:
    removed = root_chunks_withdraw(root=root)
    return ApplicationError(
        f"refused: {reason}; nothing was read and its {removed} stored chunks were removed from search",
        details={"chunks_removed": removed},
    )


def _identity(info: os.stat_result) -> str:
    return f"{info.st_dev}:{info.st_ino}"


def _described(identity: str) -> str:
    device, _, inode = identity.partition(":")
    return f"device {device}, inode {inode}"


def glob_problem(glob: str) -> str | None:
    """Why a segment's glob could never match a file (None when it is usable)."""
    if not glob:
        return "A segment needs a glob, e.g. docs/** or src/api/*.py."
    if glob.startswith("#") or glob.startswith("!"):
        return "A segment's glob claims files: it cannot be a comment (#) or a negation (!)."
    spec = pathspec.GitIgnoreSpec.from_lines([glob])
    if not spec.patterns or spec.patterns[0].regex is None:
        return f"{glob!r} is not a valid glob (an unclosed [ or a stray backslash?)."
    return None


def root_sources(root: WorkspaceRoot):
    """The root's sources: its default segment's and each segment's."""
    return Source.objects.filter(root=root)


@transaction.atomic
def root_chunks_withdraw(*, root: WorkspaceRoot) -> int:
    """Delete every chunk and file state of the root (all segments); the next good job rebuilds them."""
    sources = root_sources(root)
    IndexedFile.objects.filter(source__in=sources).delete()
    return Chunk.objects.filter(source__in=sources).delete()[0]


def root_files_reread(*, root: WorkspaceRoot) -> int:
    """Make the next job read every stored file of the root again (e.g. the secret scan was turned on).

    Only the stored mtime is forgotten: content hashes still keep unchanged
    files from being embedded again.
    """
    return IndexedFile.objects.filter(source__in=root_sources(root)).update(mtime_ns=-1)


@transaction.atomic
def root_sources_sync(*, root: WorkspaceRoot) -> int:
    """Source rows for the root's default segment and each segment, with scope and channels.

    Returns how many files changed segment (the caller queues a job to
    re-embed those whose new segment reads another model).

    Searches read scope from these rows, so a change applies at once. Files
    a segment newly claims (or no longer claims) move to the Source that owns
    them now in the same transaction: a segment gated to a channel never
    keeps serving its files through the root's ungated default segment.
    """
    scope = {**root.scope_fields, "enabled": root.enabled, "kind": Source.Kind.FILE, "root": root}
    default = _source_upsert(root, {**scope, "title": root.name, "similarity_threshold": root.similarity_threshold})
    if root.source_id != default.pk:
        WorkspaceRoot.objects.filter(pk=root.pk).update(source=default)
        root.source = default
    owners: list[tuple[str, Source]] = []
    for segment in root.segments.order_by("pk"):
        source = _source_upsert(
            segment,
            {
                **scope,
                "title": f"{root.name}: {segment.name}",
                "channels": sorted(set(words(segment.channels))) or scope["channels"],
                "similarity_threshold": root.similarity_threshold
                if segment.similarity_threshold is None
                else segment.similarity_threshold,
            },
        )
        if segment.source_id != source.pk:
            Segment.objects.filter(pk=segment.pk).update(source=source)
        owners.append((segment.path_glob, source))
    # Segments deleted since (their link went with them): their files go back to the default segment, then their
    # sources go.
    gone = list(root_sources(root).exclude(pk__in=[default.pk] + [source.pk for _, source in owners]))
    owners.sort(key=lambda owner: -len(owner[0]))  # the most specific glob wins, as in _plans
    owners.append(("", default))
    moved = _files_reassign(owners=owners, sources=[source for _, source in owners] + gone)
    Source.objects.filter(pk__in=[source.pk for source in gone]).delete()
    return moved


def _source_upsert(owner: WorkspaceRoot | Segment, fields: dict) -> Source:
    """The Source ``owner`` links to, updated with ``fields``; created when it has none yet.

    A row that already carries the owner's key (its link was lost) is taken
    over rather than duplicated: the key is unique.
    """
    fields = {**fields, "key": source_key(owner)}
    if owner.source_id and Source.objects.filter(pk=owner.source_id).update(**fields):
        return Source.objects.get(pk=owner.source_id)
    source, _ = Source.objects.update_or_create(key=fields["key"], defaults=fields)
    return source


def _files_reassign(*, owners: list[tuple[str, Source]], sources: list[Source]) -> int:
    """Move indexed files whose owning segment changed to their new Source.

    The chunks keep their vectors when the new owner reads the same model (or
    none yet); otherwise they are deleted and the next job embeds them with
    the owner's model. Either way no file stays where its old scope applies.
    """
    matchers = [(pathspec.GitIgnoreSpec.from_lines([glob]) if glob else None, source) for glob, source in owners]

    def owner(path: str) -> Source:
        return next(source for matcher, source in matchers if matcher is None or matcher.match_file(path))

    by_id = {source.pk: source for source in sources}
    moves: dict[tuple[int, int], list[str]] = {}
    rows = IndexedFile.objects.filter(source__in=sources).values_list("source_id", "path").distinct()
    chunk_rows = Chunk.objects.filter(source__in=sources).exclude(path="").values_list("source_id", "path").distinct()
    for source_id, path in {*rows, *chunk_rows}:
        target = owner(path)
        if target.pk != source_id:
            moves.setdefault((source_id, target.pk), []).append(path)
    for (source_id, target_id), paths in moves.items():
        old, new = by_id[source_id], by_id[target_id]
        chunks = Chunk.objects.filter(source=old, path__in=paths)
        files = IndexedFile.objects.filter(source=old, path__in=paths)
        keeps_vectors = new.embedding_model_id in (None, old.embedding_model_id)
        if keeps_vectors:
            Chunk.objects.filter(source=new, path__in=paths).delete()
            IndexedFile.objects.filter(source=new, path__in=paths).delete()
            chunks.exclude(generation=old.active_generation).delete()
            files.exclude(generation=old.active_generation).delete()
            chunks.update(source=new, generation=new.active_generation)
            files.update(source=new, generation=new.active_generation)
            if new.embedding_model_id is None and old.embedding_model_id is not None:
                Source.objects.filter(pk=new.pk).update(embedding_model_id=old.embedding_model_id)
                new.embedding_model_id = old.embedding_model_id
        else:
            chunks.delete()
            files.delete()
        log.info(
            "moved %d file(s) from %s to %s%s", len(paths), old.key, new.key, "" if keeps_vectors else " (to re-embed)"
        )
    return sum(len(paths) for paths in moves.values())


def _plans(root: WorkspaceRoot, config: EmbeddingConfig, *, rebuild: bool = False) -> list[SegmentPlan]:
    root_sources_sync(root=root)
    plans = []
    for segment in root.segments.select_related("source").order_by("pk"):
        assert segment.source is not None  # root_sources_sync gave every segment its source
        matcher = pathspec.GitIgnoreSpec.from_lines([segment.path_glob])
        plans.append(
            _plan(
                segment.source,
                segment.path_glob,
                matcher,
                segment.embedding_model_name or root.embedding_model_name,
                config,
                rebuild,
            )
        )
    # The most specific segment wins: longest glob first, the default last.
    plans.sort(key=lambda p: -len(p.glob))
    assert root.source_id is not None  # root_sources_sync gave the root its source too
    plans.append(_plan(Source.objects.get(pk=root.source_id), "", None, root.embedding_model_name, config, rebuild))
    return plans


def _plan(
    source: Source, glob: str, matcher, model_name: str, config: EmbeddingConfig, rebuild: bool = False
) -> SegmentPlan:
    """Where a segment's files are written; ``rebuild`` (a git history rewritten): beside the active generation."""
    model = embedding_model_for(model_name, config=config)
    rebuilding = source.embedding_model_id is not None and (rebuild or source.embedding_model_id != model.pk)
    generation = source.active_generation + 1 if rebuilding else source.active_generation
    return SegmentPlan(source, glob, matcher, model, generation, rebuilding)


def _segment_for(path: str, plans: list[SegmentPlan]) -> SegmentPlan:
    return next(p for p in plans if p.matcher is None or p.matcher.match_file(path))


def root_index(*, job: IndexJob, config: IndexingConfig | None = None) -> str:
    """Run a job claimed by ``jobs.job_start`` to its end, then release the root's lock.

    The job records its outcome before the lock goes, so no other worker
    ever sees it "running" with nobody holding it while this one is alive.
    Returns the job's final status. ``config``: built by the caller (the
    task), else from the settings now.
    """
    try:
        _Run(job, config or indexing_config()).run()
    except git_roots.GitHandOff as handoff:
        # Back to the queue as a full job; the caller (the task) sends it to the bulk queue once the lock is free.
        IndexJob.objects.filter(pk=job.pk, status=JobStatus.RUNNING, worker=job.worker).update(
            status=JobStatus.QUEUED,
            worker="",
            paths=[],
            trigger=git_roots.REBUILD_TRIGGER,
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
    def __init__(self, job: IndexJob, config: IndexingConfig) -> None:
        self.job = job
        self.root: WorkspaceRoot = job.root
        self.batch = Batch(track_files=True, config=config, on_batch=self._beat, on_embedded=self._embedding)
        self.embedding = config.embedding
        self.config = config.ingest
        self.touched: list[IndexedFile] = []
        self.last_beat = 0.0
        self.root_fd = -1
        self.rules: WalkRules | None = None
        # A forced job re-embeds every file it has not stored itself: a run
        # taken over from a dead worker keeps what that attempt already did.
        self.forced_since = (job.started_at or timezone.now()) if job.force else None
        self.max_document_bytes = config.max_document_bytes
        self.read_rules = ReadRules(
            max_chars=self.config.max_chars, overlap=self.config.overlap, limits=config.extract
        )  # the root's secret-scan switch joins it in _index
        self.left_out: Counter[str] = Counter()  # files the walk left out (patterns, size, type), by reason
        self.git_config = config.git
        self.git: git_roots.GitPlan | None = None
        self.states: dict[tuple[int, int, str], IndexedFile] = {}
        self.moved: set[tuple[int, int, str]] = set()  # renamed files' former keys: their chunks went with them

    def run(self) -> None:
        if self.root.is_git:
            if self.git_config is None:
                raise ApplicationError("this worker has no git configuration (RAG_VAR_DIR)")
            self.git = git_roots.job_git_prepare(root=self.root, job=self.job, config=self.git_config)
            if self.git.nothing:
                git_roots.root_git_indexed(root=self.root, plan=self.git)
                jobs.job_finish(
                    job_id=self.job.pk,
                    status=JobStatus.SUCCEEDED,
                    message=f"no file changed: {self.git.commit[:12]} is indexed",
                    job=self.job,
                )
                return
        self.root_fd = root_directory_check(root=self.root)
        try:
            self._index()
        finally:
            os.close(self.root_fd)

    def _index(self) -> None:
        root = self.root
        plans = _plans(root, self.embedding, rebuild=bool(self.git and self.git.rebuild))
        self.rules = WalkRules(
            include=tuple(words(root.include_globs)),
            exclude_dirs=frozenset(words(root.exclude_dirs)),
            max_file_bytes=root.max_file_bytes,
            deny=tuple(words(root.deny_patterns)),
            index_hidden=root.index_hidden,
            scan_secrets=root.scan_secrets,
            hard_links_inside=root.hard_links_inside,
            max_document_bytes=self.max_document_bytes,
        )
        self.read_rules = replace(self.read_rules, scan_secrets=root.scan_secrets)
        targeted = self._targeted(plans)
        files = IndexedFile.objects.filter(source__in=[p.source for p in plans])
        if targeted:
            # Only what the job is about: a path, or (a directory, perhaps gone) the files below it.
            about = Q(path__in=targeted)
            for path in targeted:
                about |= Q(path__startswith=path + "/")
            files = files.filter(about)
        states = self.states = {(s.source_id, s.generation, s.path): s for s in files}
        self.job.phase = Phase.LISTING
        self._beat(force=True)
        if targeted:
            walker = walk_paths(self.root_fd, self.rules, targeted, self.left_out)
        else:
            walker = walk(self.root_fd, self.rules, self.left_out)
        entries = []
        for entry in walker:
            entries.append(entry)
            self.job.files_total = len(entries)  # found so far, while the phase says listing
            self._beat()
        for link in self.git.gitlinks if self.git else ():
            entries.append(Skipped(link, SUBMODULE_REASON))
        self.job.files_total = len(entries)
        self.job.phase = Phase.READING
        self._beat(force=True)
        kept: set[tuple[int, int, str]] = set()
        for entry in entries:
            self.job.files_seen += 1
            if isinstance(entry, Skipped):
                self._skip(entry)
            else:
                plan = _segment_for(entry.path, plans)
                if self._consider(entry, plan, states.get((plan.source.pk, plan.generation, entry.path))):
                    kept.add((plan.source.pk, plan.generation, entry.path))
            self._beat()
        self._flush()
        self.job.phase = Phase.FINISHING
        self._beat(force=True)
        self._delete_missing(plans, states, kept | self.moved)
        self._flip(plans)
        if self.git:
            git_roots.root_git_indexed(root=root, plan=self.git)
        if not targeted:
            # A targeted job vouches for its paths only: the re-verify's schedule and cooldown go on as they were.
            WorkspaceRoot.objects.filter(pk=root.pk).update(last_verified_at=timezone.now())
        job = self.job
        job.left_out = dict(self.left_out)
        outcome = job_outcome(job_facts(job, status=JobStatus.SUCCEEDED))
        assert outcome is not None  # a succeeded job always has one
        summary = f"targeted at {len(targeted)} path(s): " if targeted else ""
        if self.git:
            summary = f"{'rebuilt at' if self.git.rebuild else 'at'} {self.git.commit[:12]}, " + summary
        summary += outcome.text
        jobs.job_finish(job_id=job.pk, status=JobStatus.SUCCEEDED, message=summary, job=job)

    def _targeted(self, plans: list[SegmentPlan]) -> list[str]:
        """The paths a targeted job reads; empty when the job (or what it must do) needs the whole root."""
        assert self.rules is not None
        if not self.job.paths:
            return []
        if any(plan.rebuilding for plan in plans):
            return []  # a new model is written beside the old and flipped only once every file is in it
        if self.rules.hard_links_inside:
            return []  # whether every link of a file is inside the root is known only after the whole walk
        return list(self.job.paths)

    def _fingerprint(self, digest: str, plan: SegmentPlan, path: str) -> str:
        return fingerprint(
            content=digest, model=plan.model.spec.identity, config=self.config, extractor=extractor_identity(path)
        )

    def _consider(self, entry: Candidate, plan: SegmentPlan, state: IndexedFile | None) -> bool:
        """Queue the file if it changed; True when it stays in the index."""
        # Stored chunks are current when the file's stored hash, read through
        # today's chunker, settings and model, gives the stored fingerprint.
        current = (
            state is not None
            and state.fingerprint == self._fingerprint(state.content_hash, plan, entry.path)
            and state.embedding_model_id == plan.model.pk
            and (self.forced_since is None or state.indexed_at >= self.forced_since)
        )
        if current and state is not None and (state.size, state.mtime_ns) == (entry.size, entry.mtime_ns):
            self.job.files_unchanged += 1  # not even read
            return True
        assert self.rules is not None  # set by _index before any file is considered
        raw = read_bytes(self.root_fd, entry, self.rules)
        if isinstance(raw, Skipped):
            self._skip(raw, failed=raw.reason.startswith("unreadable"))
            # Saved (replaced) while the job ran: keep what is stored, the next job reads the new file.
            return raw.reason == REPLACED and state is not None
        content = content_read(raw, entry.path, self.read_rules)
        if isinstance(content, Skipped):
            self._skip(content, failed=reason_failed(content.reason))
            return False
        digest = content.digest
        if current and state is not None and state.content_hash == digest:
            state.size, state.mtime_ns = entry.size, entry.mtime_ns
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
        if self.git:
            # The commit each chunk was read at: hits, /context and the viewer show it and build the permalink.
            chunks = [replace(chunk, metadata={**chunk.metadata, COMMIT_KEY: self.git.commit}) for chunk in chunks]
        self.job.files_changed += 1
        self.job.chunks_queued += len(chunks)
        self._store(
            Document(
                source=plan.source,
                generation=plan.generation,
                path=entry.path,
                chunks=chunks,
                model=plan.model,
                content_hash=digest,
                fingerprint=self._fingerprint(digest, plan, entry.path),
                size=entry.size,
                mtime_ns=entry.mtime_ns,
                text=text if self.config.contextual else "",
            )
        )
        return True

    def _moved(self, entry: Candidate, plan: SegmentPlan, digest: str) -> bool:
        """A file git renamed with its content unchanged: its chunks and vectors move to the new path, nothing is
        embedded. False when it was not renamed, or its former state is not what indexing it now would write."""
        former = self.git.renames.get(entry.path) if self.git else None
        key = (plan.source.pk, plan.generation, former or "")
        old = self.states.get(key) if former else None
        if (
            self.git is None
            or old is None
            or old.content_hash != digest
            or old.fingerprint != self._fingerprint(digest, plan, entry.path)
            or old.embedding_model_id != plan.model.pk
            or self.forced_since is not None
        ):
            return False
        with transaction.atomic():
            chunks = list(Chunk.objects.filter(source_id=key[0], generation=key[1], path=former).only("pk", "metadata"))
            for chunk in chunks:
                chunk.path = entry.path
                chunk.metadata = {**chunk.metadata, COMMIT_KEY: self.git.commit}
            Chunk.objects.bulk_update(chunks, ["path", "metadata"], batch_size=1000)
            IndexedFile.objects.filter(pk=old.pk).update(path=entry.path, size=entry.size, mtime_ns=entry.mtime_ns)
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
        # Every chunk this run embedded goes through its one batch (a new attempt starts both at zero).
        self.job.chunks_embedded = self.batch.embedded
        self.job.chunks_deleted += self.batch.deleted - deleted
        self.job.chunks_undescribed += self.batch.undescribed - undescribed

    def _embedding(self, done: int) -> None:
        """The batch's embedding call has embedded ``done`` of the chunks waiting (the beat follows)."""
        self.job.phase = Phase.EMBEDDING
        self.job.chunks_embedded = self.batch.embedded + done

    def _flush(self) -> None:
        self._store(None)
        if self.touched:
            IndexedFile.objects.bulk_update(self.touched, ["size", "mtime_ns"], batch_size=1000)
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

    def _beat(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.last_beat >= _HEARTBEAT_SECONDS:
            self.job.left_out = dict(self.left_out)
            jobs.job_progress(self.job)
            self.last_beat = now
