"""A workspace root's directory and segments: its pin, its sources (one per segment), its withdrawal.

Indexing a root is the pipeline's (sources/pipeline/), fed by the root's
connector (sources/connectors/; a folder checks the pin here first).

A root is pinned to its directory (device and inode) when it is saved: a
job, read, grep or the viewer that finds its path leading elsewhere (a
symlink swapped in, the directory replaced) refuses it, and the job also
withdraws its chunks.
"""

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import pathspec
from django.db import transaction

from kernel.errors import ApplicationError, Conflict
from sources.config import root_base_dirs
from sources.models import Chunk, FileText, IndexedFile, Segment, Source, WorkspaceRoot, source_key, words
from sources.walk import root_open

log = logging.getLogger(__name__)


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
    FileText.objects.filter(source__in=sources).delete()
    return Chunk.objects.filter(source__in=sources).delete()[0]


def root_files_reread(*, root: WorkspaceRoot) -> int:
    """Make the next job read every stored file of the root again (e.g. the secret scan was turned on).

    Only the stored mtime and marker (a web page's validators) are forgotten:
    content hashes still keep unchanged files from being embedded again.
    """
    return IndexedFile.objects.filter(source__in=root_sources(root)).update(mtime_ns=-1, marker="")


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
    owners.sort(key=lambda owner: -len(owner[0]))  # the most specific glob wins, as in pipeline.plans.segment_plans
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
        texts = FileText.objects.filter(source=old, path__in=paths)  # a file's text goes where its state goes
        keeps_vectors = new.embedding_model_id in (None, old.embedding_model_id)
        if keeps_vectors:
            Chunk.objects.filter(source=new, path__in=paths).delete()
            IndexedFile.objects.filter(source=new, path__in=paths).delete()
            FileText.objects.filter(source=new, path__in=paths).delete()
            chunks.exclude(generation=old.active_generation).delete()
            files.exclude(generation=old.active_generation).delete()
            texts.exclude(generation=old.active_generation).delete()
            chunks.update(source=new, generation=new.active_generation)
            files.update(source=new, generation=new.active_generation)
            texts.update(source=new, generation=new.active_generation)
            if new.embedding_model_id is None and old.embedding_model_id is not None:
                Source.objects.filter(pk=new.pk).update(embedding_model_id=old.embedding_model_id)
                new.embedding_model_id = old.embedding_model_id
        else:
            chunks.delete()
            files.delete()
            texts.delete()
        log.info(
            "moved %d file(s) from %s to %s%s", len(paths), old.key, new.key, "" if keeps_vectors else " (to re-embed)"
        )
    return sum(len(paths) for paths in moves.values())
