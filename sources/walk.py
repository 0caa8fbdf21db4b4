"""Walk a workspace root: which files to index, and why others are skipped.

Pure Python (no Django). Never leaves the root: directories are not followed
through symlinks, and a file symlink is followed only when its target lies
inside the root. ``.gitignore`` files are honoured at every level.
"""

import fnmatch
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pathspec

BINARY_PROBE_BYTES = 8192


@dataclass(frozen=True, slots=True)
class Candidate:
    path: str  # relative, "/"-separated
    absolute: str
    size: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class Skipped:
    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class WalkRules:
    include: tuple[str, ...]
    exclude_dirs: frozenset[str]
    max_file_bytes: int

    def included(self, name: str, relative: str) -> bool:
        return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(relative, p) for p in self.include)


def walk(root: str, rules: WalkRules) -> Iterator[Candidate | Skipped]:
    """Yield every file to consider (sorted, deterministic) or why one is skipped."""
    real_root = os.path.realpath(root)
    ignores: list[tuple[str, pathspec.PathSpec]] = []  # (directory prefix, spec)
    for directory, dirnames, filenames in os.walk(real_root, followlinks=False, onerror=None):
        relative_dir = os.path.relpath(directory, real_root).replace(os.sep, "/")
        prefix = "" if relative_dir == "." else relative_dir + "/"
        ignores = [(p, s) for p, s in ignores if prefix.startswith(p)]
        spec = _gitignore(directory)
        if spec is not None:
            ignores.append((prefix, spec))
        kept = []
        for name in sorted(dirnames):
            relative = prefix + name
            full = os.path.join(directory, name)
            if name in rules.exclude_dirs or _ignored(ignores, relative + "/"):
                continue
            if os.path.islink(full):
                yield Skipped(relative, "symlinked directory (not followed)")
                continue
            kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            relative = prefix + name
            if not rules.included(name, relative) or _ignored(ignores, relative):
                continue
            yield _candidate(os.path.join(directory, name), relative, real_root, rules)


def _candidate(full: str, relative: str, real_root: str, rules: WalkRules) -> Candidate | Skipped:
    try:
        if os.path.islink(full):
            target = os.path.realpath(full)
            if os.path.commonpath([target, real_root]) != real_root:
                return Skipped(relative, "symlink points outside the root")
        info = os.stat(full)
    except (OSError, ValueError) as exc:
        return Skipped(relative, f"cannot stat: {exc.strerror or exc}")
    if not stat.S_ISREG(info.st_mode):
        return Skipped(relative, "not a regular file")
    if info.st_size > rules.max_file_bytes:
        return Skipped(relative, f"too large: {info.st_size:,} bytes (limit {rules.max_file_bytes:,})")
    return Candidate(relative, full, info.st_size, info.st_mtime_ns)


def read_text(candidate: Candidate, max_file_bytes: int) -> str | Skipped:
    """The file's text, or why it cannot be indexed (binary, undecodable, unreadable)."""
    try:
        with open(candidate.absolute, "rb") as handle:
            raw = handle.read(max_file_bytes + 1)
    except OSError as exc:
        return Skipped(candidate.path, f"unreadable: {exc.strerror or exc}")
    if len(raw) > max_file_bytes:
        return Skipped(candidate.path, f"too large: over {max_file_bytes:,} bytes")
    if b"\x00" in raw[:BINARY_PROBE_BYTES]:
        return Skipped(candidate.path, "binary file (NUL bytes)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Skipped(candidate.path, f"not valid UTF-8 (byte {exc.start})")
    if "\x00" in text:
        return Skipped(candidate.path, "binary file (NUL bytes)")
    return text


def _gitignore(directory: str) -> pathspec.PathSpec | None:
    path = Path(directory) / ".gitignore"
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _ignored(ignores: list[tuple[str, pathspec.PathSpec]], relative: str) -> bool:
    return any(spec.match_file(relative[len(prefix):]) for prefix, spec in ignores)
