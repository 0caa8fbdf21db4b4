"""Watched roots: a changed file is queued as a targeted job for just its path, within seconds.

One process (``manage.py rag_watch``, a supervised child of `make run`, its
own service under compose) watches every enabled root whose ``watch`` box is
ticked, through inotify (watchfiles). Events are grouped (a quiet spell ends
a group), filtered cheaply by the root's own rules (excluded directories,
hidden names, patterns, its top .gitignore; the job applies every rule
again, so a path let through here is only a little wasted work), and queued
as a targeted job (sources/jobs.py ``root_job_request(paths=...)``). A path
whose root has a job running stays pending and is queued again once that
job ends. The watcher reloads its roots every few seconds from the database.

Missed events (the watcher down, an inotify queue overflow, a network
filesystem) are the periodic re-verify's to catch: it stays the safety net.
"""

import fnmatch
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import pathspec
import watchfiles
from django.db import DatabaseError, close_old_connections

from kernel.errors import ApplicationError
from sources import tasks
from sources.models import JobStatus, WorkspaceRoot, words
from sources.walk import gitignore_read

log = logging.getLogger(__name__)

# A group of events ends after this long without a new one: an editor's save (write, rename, chmod) lands in one
# group, and a single edit is queued a fifth of a second after it.
QUIET_MS = 200
# ... and after this long at most, so a file rewritten without pause (a log, a build) is still queued.
MAX_GROUP_MS = 1600
# How often the roots are read again from the database.
RELOAD_SECONDS = 2.0
# How often pending paths (their root had a job running) are offered again when nothing else happens.
RETRY_MS = 1000
GITIGNORE = ".gitignore"


@dataclass(frozen=True, slots=True)
class WatchedRoot:
    """One root as the watcher filters its events: cheap checks only, the job decides."""

    pk: int
    directory: str  # the real directory, as inotify reports paths under it
    include: tuple[str, ...]
    exclude_dirs: frozenset[str]
    index_hidden: bool
    gitignore: pathspec.PathSpec | None = field(default=None, compare=False)
    # What the root's filter depends on, to see that it changed.
    signature: tuple = ()

    def wanted(self, relative: str, *, deleted: bool) -> bool:
        """Whether a change at ``relative`` may concern an indexed file (a directory stands for its files)."""
        parts = relative.split("/")
        if any(part in self.exclude_dirs for part in parts):
            return False
        if not self.index_hidden and any(part.startswith(".") for part in parts):
            return False
        if self.gitignore is not None and self.gitignore.match_file(relative):
            return False
        name = parts[-1]
        if any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(relative, p) for p in self.include):
            return True
        # A directory created, moved or deleted carries its files along; a deleted one can no longer be asked, so a
        # name without a suffix is taken for one (the job finds nothing below it when it was not).
        if deleted:
            return "." not in name
        return os.path.isdir(os.path.join(self.directory, relative))


def watched_roots() -> list[WatchedRoot]:
    """The enabled roots whose ``watch`` box is ticked and whose directory exists now."""
    found = []
    # A git root's checkout changes only by its own jobs: a push reaches it through the webhook or the schedule.
    for root in WorkspaceRoot.objects.filter(enabled=True, watch=True, git_url="").order_by("pk"):
        directory = root.symlink_target or os.path.realpath(root.path)
        if not os.path.isdir(directory):
            continue  # perhaps not mounted yet: looked for again at the next reload
        signature = (root.pk, directory, root.include_globs, root.exclude_dirs, root.index_hidden)
        found.append(
            WatchedRoot(
                pk=root.pk,
                directory=directory,
                include=tuple(words(root.include_globs)),
                exclude_dirs=frozenset(words(root.exclude_dirs)),
                index_hidden=root.index_hidden,
                gitignore=_gitignore(directory),
                signature=signature,
            )
        )
    return found


def _gitignore(directory: str) -> pathspec.PathSpec | None:
    """The root's top .gitignore, read as the walk reads it (through the directory, never through a symlink)."""
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        return gitignore_read(dir_fd)
    finally:
        os.close(dir_fd)


@dataclass
class Pending:
    """What waits to be queued, by root: paths, and roots whose .gitignore changed (a full job)."""

    paths: dict[int, set[str]] = field(default_factory=dict)
    full: set[int] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.paths or self.full)


def changes_route(changes: Iterable[tuple[watchfiles.Change, str]], roots: list[WatchedRoot], pending: Pending) -> int:
    """Add each change to its root's pending paths when it may matter; returns how many were kept."""
    kept = 0
    # The deepest root first: a root inside another root's directory owns its own files.
    ordered = sorted(roots, key=lambda root: -len(root.directory))
    for change, path in changes:
        root = next((r for r in ordered if path.startswith(r.directory + os.sep)), None)
        if root is None:
            continue
        relative = path[len(root.directory) + 1 :].replace(os.sep, "/")
        if relative.rsplit("/", 1)[-1] == GITIGNORE:
            pending.full.add(root.pk)  # which files match changed: only a walk can tell
            kept += 1
        elif root.wanted(relative, deleted=change == watchfiles.Change.deleted):
            pending.paths.setdefault(root.pk, set()).add(relative)
            kept += 1
    return kept


def pending_queue(pending: Pending) -> Pending:
    """Queue a job for each root with pending changes; returns what must wait (its root has a job running)."""
    waiting = Pending()
    for root_id in sorted(pending.full | set(pending.paths)):
        full = root_id in pending.full
        paths = sorted(pending.paths.get(root_id, ()))
        try:
            if full:
                job, created = tasks.root_reindex_request(root_id=root_id, ignore_cooldown=True, trigger="watch")
            else:
                job, created = tasks.root_reindex_request(root_id=root_id, paths=paths, trigger="watch")
        except ApplicationError as exc:
            log.info("root %s: changes not queued: %s", root_id, exc.message)  # disabled or deleted since
            continue
        except DatabaseError as exc:
            log.warning("root %s: changes not queued, the database failed (trying again): %s", root_id, exc)
            _keep(waiting, root_id, full, paths)
            continue
        if job.status == JobStatus.RUNNING:
            _keep(waiting, root_id, full, paths)  # that job may have read them already: queued once it ends
            continue
        what = "the whole root" if full else f"{len(paths)} path(s)"
        log.info("root %s: %s %s as job %s", root_id, "queued" if created else "added", what, job.pk)
    return waiting


def _keep(pending: Pending, root_id: int, full: bool, paths: list[str]) -> None:
    if full:
        pending.full.add(root_id)
    else:
        pending.paths.setdefault(root_id, set()).update(paths)


def watch_run(*, stop: threading.Event, beat: Callable[[], None] = lambda: None) -> None:
    """Watch until ``stop`` is set: reload the roots, watch their directories, queue what changes.

    ``beat`` is called every time the watcher wakes (a health check reads it).
    """
    pending = Pending()
    while not stop.is_set():
        beat()
        roots = _roots_load()
        if roots is None or not roots:
            pending = _pending_offer(pending)
            stop.wait(RELOAD_SECONDS)
            continue
        log.info("watching %d root(s): %s", len(roots), ", ".join(root.directory for root in roots))
        pending = _watch(roots, pending, stop, beat)


def _watch(roots: list[WatchedRoot], pending: Pending, stop: threading.Event, beat: Callable[[], None]) -> Pending:
    """Watch ``roots`` until their list changes or ``stop`` is set; returns what still waits."""
    signatures = [root.signature for root in roots]
    reloaded = time.monotonic()
    for changes in watchfiles.watch(
        *(root.directory for root in roots),
        watch_filter=None,  # the roots' own rules filter, in changes_route
        debounce=MAX_GROUP_MS,
        step=QUIET_MS,
        rust_timeout=RETRY_MS,
        yield_on_timeout=True,
        stop_event=stop,
        raise_interrupt=False,
        ignore_permission_denied=True,
    ):
        beat()
        changes_route(changes, roots, pending)
        pending = _pending_offer(pending)
        if time.monotonic() - reloaded >= RELOAD_SECONDS:
            reloaded = time.monotonic()
            fresh = _roots_load()
            if fresh is not None and [root.signature for root in fresh] != signatures:
                break
            if fresh is not None:
                # A new top .gitignore changes the cheap filter only; the job that it queued reads it anyway.
                roots = fresh
    return pending


def _pending_offer(pending: Pending) -> Pending:
    if not pending:
        return pending
    close_old_connections()
    return pending_queue(pending)


def _roots_load() -> list[WatchedRoot] | None:
    """The watched roots; None when the database cannot be read now (the watcher goes on with what it has)."""
    close_old_connections()
    try:
        return watched_roots()
    except DatabaseError as exc:
        log.warning("cannot read the roots to watch (trying again): %s", exc)
        return None
