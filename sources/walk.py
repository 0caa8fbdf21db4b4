"""Walk a workspace root: which files to index, and why others are skipped.

Pure Python (no Django). Never leaves the root: the root is opened once as a
directory descriptor (``root_open``), and every directory and file below it
is opened relative to that descriptor one name at a time with O_NOFOLLOW.
Symlinks are never followed, each is listed as skipped: a link, or a file or
directory swapped for one between listing and reading, cannot lead outside.
``.gitignore`` files are honoured at every level; secret-bearing names and
hidden files are skipped unless a root's rules say otherwise.

O_NOFOLLOW cannot see a hard link: ``ln /etc/passwd root/passwd.txt`` is a
regular file inside the root whose content lives outside it. So a file with
more than one link is skipped, unless the root allows hard links whose every
link is inside it (counted by device and inode over the walk).
"""

import errno
import fnmatch
import os
import re
import stat
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import pathspec

from sources.extract import extractor_for
from sources.sensitive import DEFAULT_DENY, secret_found

BINARY_PROBE_BYTES = 8192
GITIGNORE_MAX_BYTES = 1_000_000  # a larger .gitignore is not one anybody wrote; ignored

SYMLINK = "symlink (not followed)"
SECRET_NAME = "secret-bearing name"
HIDDEN_DIRECTORY = "hidden directory"
HIDDEN_FILE = "hidden file"
REPLACED = "replaced since it was listed (read by the next job)"
CONTROL_NAME = "control character in the name (not indexed)"
HARD_LINK = "hard link"  # every hard-link reason starts so
# Left out without a line of their own (there may be thousands): counted in ``walk``'s ``left_out``.
NOT_INCLUDED = "not matching the root's patterns"
GITIGNORED = "ignored by .gitignore"
# Directories pruned whole are counted as directories: counting their files would walk what they exist to skip.
EXCLUDED_DIRECTORY = "directory excluded by name"
GITIGNORED_DIRECTORY = "directory ignored by .gitignore"
_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# O_PATH passes through directories that may be searched but not listed (mode --x); Linux only.
_TRAVERSE = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_LIST = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
# O_NONBLOCK: a FIFO swapped in after listing must not hang the job in open().
READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | _CLOEXEC


@dataclass(frozen=True, slots=True)
class Candidate:
    path: str  # relative, "/"-separated
    size: int
    mtime_ns: int
    device: int  # with inode: the file read later must be the file listed
    inode: int
    links: int  # st_nlink: more than one, and the same content may also live outside the root


@dataclass(frozen=True, slots=True)
class Skipped:
    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class WalkRules:
    include: tuple[str, ...]
    exclude_dirs: frozenset[str]
    max_file_bytes: int
    deny: tuple[str, ...] = tuple(DEFAULT_DENY.split())  # .gitignore syntax, case-insensitive
    index_hidden: bool = False
    scan_secrets: bool = True
    hard_links_inside: bool = False  # allow a hard-linked file when every one of its links is among the walk's files
    # Documents (PDF, Office...) are bigger than source files: their own limit, when it is larger than the root's.
    max_document_bytes: int = 0
    _deny: pathspec.PathSpec = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_deny", pathspec.GitIgnoreSpec.from_lines([p.lower() for p in self.deny]))

    def included(self, name: str, relative: str) -> bool:
        return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(relative, p) for p in self.include)

    def size_limit(self, relative: str) -> int:
        if self.max_document_bytes > self.max_file_bytes and extractor_for(relative) is not None:
            return self.max_document_bytes
        return self.max_file_bytes

    def refused(self, name: str, relative: str, *, directory: bool) -> str | None:
        """Why a name that would be indexed (or entered) is not: a secret-bearing or hidden name."""
        if self._deny.match_file(relative.lower() + ("/" if directory else "")):
            return SECRET_NAME
        if name.startswith(".") and not self.index_hidden:
            return HIDDEN_DIRECTORY if directory else HIDDEN_FILE
        return None


def root_open(path: str) -> int:
    """A directory descriptor of ``path`` (absolute, already resolved), reached without following any symlink.

    Raises OSError when a component is a symlink (the path changed since it
    was resolved) or is missing.
    """
    parts = [part for part in path.split("/") if part]
    if not os.path.isabs(path) or any(part in (".", "..") for part in parts):
        raise OSError(errno.EINVAL, "not an absolute resolved path", path)
    fd = os.open("/", _TRAVERSE)
    try:
        for part in parts:
            following = os.open(part, _TRAVERSE, dir_fd=fd)
            os.close(fd)
            fd = following
        return os.open(".", _LIST, dir_fd=fd)  # reached through no symlink; now open it for listing
    finally:
        os.close(fd)


def walk(root_fd: int, rules: WalkRules, left_out: Counter | None = None) -> Iterator[Candidate | Skipped]:
    """Yield every file to consider (sorted, deterministic) or why one is skipped.

    Files no pattern includes, files .gitignore names, and directories pruned
    whole (exclude_dirs, .gitignore) are only counted, by reason, in
    ``left_out``: a job says how many it left out and why.

    A file with several hard links is skipped, unless ``rules.hard_links_inside``
    and the walk found as many paths to its (device, inode) as it has links:
    known only once the whole tree is listed, so then the walk is listed first.
    """
    if not rules.hard_links_inside:
        for entry in _listing(root_fd, rules, left_out):
            if isinstance(entry, Candidate) and entry.links > 1:
                entry = Skipped(entry.path, f"{HARD_LINK} ({entry.links} links; hard links are not indexed)")
            yield entry
        return
    entries = list(_listing(root_fd, rules, left_out))
    found = Counter((e.device, e.inode) for e in entries if isinstance(e, Candidate) and e.links > 1)
    for entry in entries:
        if isinstance(entry, Candidate) and entry.links > 1 and found[(entry.device, entry.inode)] != entry.links:
            entry = Skipped(
                entry.path,
                f"{HARD_LINK} ({entry.links} links, {found[(entry.device, entry.inode)]} of them "
                "among this root's files; every link must be)",
            )
        yield entry


def walk_paths(
    root_fd: int, rules: WalkRules, paths: list[str], left_out: Counter | None = None
) -> Iterator[Candidate | Skipped]:
    """What ``walk`` yields for just ``paths`` (root-relative; a directory stands for the files below it).

    Each path is reached from the root one component at a time, and every
    component is judged as the walk judges it (excluded directories, each
    level's .gitignore, patterns, hidden and secret-bearing names, symlinks),
    so a path yields exactly what the full walk would yield for it. A path
    that is gone or no longer matches yields nothing. Hard-linked files are
    skipped as ``walk`` skips them when hard links are not allowed: counting
    a file's links inside the root takes the whole walk.
    """
    spec = gitignore_read(root_fd)
    ignores = [("", spec)] if spec is not None else []
    seen: set[str] = set()
    for path in paths:
        for entry in _path_entries(root_fd, rules, path, ignores, left_out):
            if entry.path in seen:
                continue
            seen.add(entry.path)
            if isinstance(entry, Candidate) and entry.links > 1:
                entry = Skipped(entry.path, f"{HARD_LINK} ({entry.links} links; hard links are not indexed)")
            yield entry


def _path_entries(
    root_fd: int, rules: WalkRules, path: str, ignores: list[tuple[str, pathspec.PathSpec]], left_out: Counter | None
) -> Iterator[Candidate | Skipped]:
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        yield Skipped(path, f"unsafe path {path!r}")
        return
    dir_fd, prefix = root_fd, ""
    try:
        for index, name in enumerate(parts):
            relative, last = prefix + name, index == len(parts) - 1
            try:
                info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except (FileNotFoundError, NotADirectoryError):
                return  # gone: what is stored for it goes
            except OSError as exc:
                yield Skipped(relative, f"cannot stat: {exc.strerror or exc}")
                return
            directory, symlink = stat.S_ISDIR(info.st_mode), stat.S_ISLNK(info.st_mode)
            decision = _decide(
                name,
                relative,
                directory=directory,
                symlink=symlink,
                ignores=ignores,
                rules=rules,
                left_out=left_out if last else None,
            )
            if decision is None:
                return  # left out, as the walk would leave it out
            if isinstance(decision, Skipped):
                yield decision
                return
            if directory and last:
                yield from _listing(root_fd, rules, left_out, start=(relative + "/", ignores))
                return
            if last:
                yield _candidate_of(info, relative, rules)
                return
            if symlink:
                yield Skipped(path, f"parent directory {relative} is a symlink (not followed)")
                return
            if not directory:
                return  # a file where the path needs a directory: the path is gone
            try:
                following = os.open(name, _LIST, dir_fd=dir_fd)
            except OSError as exc:
                yield Skipped(path, f"parent directory {relative} changed while it was read: {exc.strerror or exc}")
                return
            if dir_fd != root_fd:
                os.close(dir_fd)
            dir_fd, prefix = following, relative + "/"
            if (spec := gitignore_read(dir_fd)) is not None:
                ignores = [*ignores, (prefix, spec)]
    finally:
        if dir_fd != root_fd:
            os.close(dir_fd)


def _decide(
    name: str,
    relative: str,
    *,
    directory: bool,
    symlink: bool,
    ignores: list[tuple[str, pathspec.PathSpec]],
    rules: WalkRules,
    left_out: Counter | None,
) -> Skipped | bool | None:
    """How the walk treats one name: None left out (counted), a Skipped line, or True (enter it, or consider it)."""
    if directory or symlink:
        # A symlink is listed whatever its name: it may stand for a
        # directory, and the admin should see why that one is missing.
        if name in rules.exclude_dirs:
            if left_out is not None and directory:
                left_out[EXCLUDED_DIRECTORY] += 1
            return None
        if _ignored(ignores, relative + ("/" if directory else "")):
            if left_out is not None:
                left_out[GITIGNORED_DIRECTORY if directory else GITIGNORED] += 1
            return None
    elif not rules.included(name, relative):
        if left_out is not None:
            left_out[NOT_INCLUDED] += 1
        return None
    elif _ignored(ignores, relative):
        if left_out is not None:
            left_out[GITIGNORED] += 1
        return None
    if _CONTROL_CHARACTER.search(name):
        # A newline in a cited path would start a line of its own in a model's prompt.
        return Skipped(_CONTROL_CHARACTER.sub(lambda m: f"\\x{ord(m.group()):02x}", relative), CONTROL_NAME)
    if reason := rules.refused(name, relative, directory=directory):
        return Skipped(relative, reason)
    return True


def _listing(
    root_fd: int,
    rules: WalkRules,
    left_out: Counter | None,
    start: tuple[str, list[tuple[str, pathspec.PathSpec]]] = ("", []),
) -> Iterator[Candidate | Skipped]:
    pending: list[tuple[str, list[tuple[str, pathspec.PathSpec]]]] = [start]  # (directory prefix, ignores)
    while pending:
        prefix, ignores = pending.pop()
        try:
            dir_fd = open_beneath(root_fd, prefix.rstrip("/") or ".", _LIST)
        except Refused as refused:
            yield Skipped(prefix.rstrip("/"), refused.reason)
            continue
        except OSError as exc:
            yield Skipped(prefix.rstrip("/"), f"unreadable directory: {exc.strerror or exc}")
            continue
        subdirectories = []
        try:
            spec = gitignore_read(dir_fd)
            if spec is not None:
                ignores = [*ignores, (prefix, spec)]
            with os.scandir(dir_fd) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
            for entry in entries:  # inside the try: entry.stat() reads through dir_fd
                relative = prefix + entry.name
                directory = entry.is_dir(follow_symlinks=False)
                decision = _decide(
                    entry.name,
                    relative,
                    directory=directory,
                    symlink=entry.is_symlink(),
                    ignores=ignores,
                    rules=rules,
                    left_out=left_out,
                )
                if decision is None:
                    continue
                if isinstance(decision, Skipped):
                    yield decision
                elif directory:
                    subdirectories.append((relative + "/", ignores))
                else:
                    yield _candidate(entry, relative, rules)
        finally:
            os.close(dir_fd)
        pending.extend(reversed(subdirectories))


def _candidate(entry: os.DirEntry, relative: str, rules: WalkRules) -> Candidate | Skipped:
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError as exc:
        return Skipped(relative, f"cannot stat: {exc.strerror or exc}")
    return _candidate_of(info, relative, rules)


def _candidate_of(info: os.stat_result, relative: str, rules: WalkRules) -> Candidate | Skipped:
    if stat.S_ISLNK(info.st_mode):
        return Skipped(relative, SYMLINK)
    if not stat.S_ISREG(info.st_mode):
        return Skipped(relative, "not a regular file")
    if info.st_size > (limit := rules.size_limit(relative)):
        return Skipped(relative, f"too large: {info.st_size:,} bytes (limit {limit:,})")
    return Candidate(relative, info.st_size, info.st_mtime_ns, info.st_dev, info.st_ino, info.st_nlink)


def read_text(root_fd: int, candidate: Candidate, rules: WalkRules) -> str | Skipped:
    """The file's text, or why it cannot be indexed (moved, symlink, binary, undecodable, a secret)."""
    raw = read_bytes(root_fd, candidate, rules)
    return raw if isinstance(raw, Skipped) else text_decode(raw, candidate.path, rules)


def read_bytes(root_fd: int, candidate: Candidate, rules: WalkRules) -> bytes | Skipped:
    """The file's bytes, read safely below the root, or why they cannot be (moved, symlink, too large)."""
    limit = rules.size_limit(candidate.path)
    try:
        fd = open_beneath(root_fd, candidate.path, READ)
    except Refused as refused:
        return Skipped(candidate.path, refused.reason)
    except OSError as exc:
        return Skipped(candidate.path, f"unreadable: {exc.strerror or exc}")
    with open(fd, "rb", closefd=True) as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return Skipped(candidate.path, "not a regular file")
        # A new link since the listing was not counted by the walk: the next job counts it.
        if (info.st_dev, info.st_ino, info.st_nlink) != (candidate.device, candidate.inode, candidate.links):
            return Skipped(candidate.path, REPLACED)
        if info.st_size > limit:
            return Skipped(candidate.path, f"too large: {info.st_size:,} bytes (limit {limit:,})")
        try:
            raw = handle.read(limit + 1)
        except OSError as exc:
            return Skipped(candidate.path, f"unreadable: {exc.strerror or exc}")
    if len(raw) > limit:
        return Skipped(candidate.path, f"too large: over {limit:,} bytes")
    return raw


def text_decode(raw: bytes, path: str, rules: WalkRules) -> str | Skipped:
    """Bytes read as the text of a source file, or why they are not (binary, undecodable, a secret)."""
    return text_of(raw, path, scan_secrets=rules.scan_secrets)


def text_of(raw: bytes, path: str, *, scan_secrets: bool) -> str | Skipped:
    """The text rules of every item (sources/reading.py) and of read and grep: NUL probe, UTF-8, secret scan."""
    if b"\x00" in raw[:BINARY_PROBE_BYTES]:
        return Skipped(path, "binary file (NUL bytes)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Skipped(path, f"not valid UTF-8 (byte {exc.start})")
    if "\x00" in text:
        return Skipped(path, "binary file (NUL bytes)")
    if scan_secrets and (kind := secret_found(text)):
        return Skipped(path, f"contains a secret ({kind})")
    return text


class Refused(Exception):
    """A path ``open_beneath`` will not open: unsafe, or a symlink (or a non-directory) where it would have to pass."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def open_beneath(root_fd: int, relative: str, flags: int) -> int:
    """Open ``relative`` below the root one component at a time, never through a symlink (openat-style).

    ``flags`` open the last component (``READ`` for a file). Raises Refused
    with a readable reason when a component is (now) a symlink or no longer
    a directory, OSError for anything else.
    """
    parts = relative.split("/")
    if any(part in ("", "..") for part in parts) or ("." in parts and relative != "."):
        raise Refused(f"unsafe path {relative!r}")
    fd = root_fd
    try:
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            try:
                following = os.open(part, flags if last else _TRAVERSE, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                raise Refused(_refusal(fd, part, "/".join(parts[: index + 1]), last=last)) from exc
            if fd != root_fd:
                os.close(fd)
            fd = following
    except BaseException:
        if fd != root_fd:
            os.close(fd)
        raise
    return fd


def _refusal(dir_fd: int, part: str, so_far: str, *, last: bool) -> str:
    try:
        is_link = stat.S_ISLNK(os.stat(part, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        is_link = False
    if last:
        return SYMLINK if is_link else "not a directory (changed since it was listed)"
    if is_link:
        return f"parent directory {so_far} is a symlink (not followed)"
    return f"parent directory {so_far} is no longer a directory"


def gitignore_read(dir_fd: int) -> pathspec.PathSpec | None:
    """The directory's .gitignore, read like any file: through the descriptor, never through a symlink."""
    try:
        fd = os.open(".gitignore", READ, dir_fd=dir_fd)
    except OSError:
        return None
    with open(fd, "rb", closefd=True) as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            raw = handle.read(GITIGNORE_MAX_BYTES + 1)
        except OSError:
            return None
    if len(raw) > GITIGNORE_MAX_BYTES:
        return None
    return pathspec.GitIgnoreSpec.from_lines(raw.decode("utf-8", errors="replace").splitlines())


def _ignored(ignores: list[tuple[str, pathspec.PathSpec]], relative: str) -> bool:
    return any(spec.match_file(relative[len(prefix) :]) for prefix, spec in ignores)
