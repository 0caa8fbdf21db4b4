"""What a file:// git remote leads git to read, and the rule that all of it lies under RAG_ROOT_BASE_DIRS.

A file:// URL under a base directory is not enough: git percent-decodes its
path, follows a gitfile (``gitdir: ELSEWHERE``) and a worktree's
``commondir``, and reads objects from every store ``objects/info/alternates``
names; a symlink inside the repository leads anywhere. Each of these read a
repository outside the base directories (issue 39 item 3) whose files were
then served by read, grep and the viewer. No git setting turns them off for
upload-pack, so the paths are resolved here and judged before every fetch.
"""

import os
from pathlib import Path
from urllib.parse import unquote


def local_url_problem(url: str, bases: tuple[str, ...]) -> str | None:
    """Why a file:// URL may not be cloned: the repository git would read is not wholly under ``bases``
    (RAG_ROOT_BASE_DIRS), the URL's path or what it leads to (a gitfile, a worktree's commondir, alternates, a
    symlink inside the repository) included."""
    if not url.startswith("file://"):
        return None
    # git percent-decodes a file:// URL's path (file:///base/%2e%2e/elsewhere leaves the base directory).
    path = unquote(url.removeprefix("file://"))
    if not path.startswith("/"):
        return "a file:// URL names an absolute path (file:///srv/repos/repo.git)"
    if "\x00" in path:  # %00: no path holds one (os.path.realpath raises on it)
        return "a file:// URL's path may not hold a NUL character (%00)"
    outside = [p for p in repository_paths(path) if not _under(p, bases)]
    if not outside:
        return None
    return (
        f"a file:// repository must lie under RAG_ROOT_BASE_DIRS ({', '.join(bases)}), as a directory root must, "
        f"and so must all git reads through it: {outside[0]} does not"
    )


def _under(path: str, bases: tuple[str, ...]) -> bool:
    if not os.path.isabs(path):  # what cannot be judged by its place (http-alternates, a quoted alternate)
        return False
    return any(os.path.commonpath([path, base]) == base for base in bases)


# How deep git follows alternates of alternates (sha1-file.c, link_alt_odb_entry).
_ALTERNATE_DEPTH = 5


def repository_paths(path: str) -> list[str]:
    """Every resolved path git reads when it serves the repository at ``path`` (upload-pack over file://).

    git tries ``PATH/.git``, ``PATH``, ``PATH.git/.git`` and ``PATH.git`` (path.c, enter_repo); each may be a
    gitfile (``gitdir: ELSEWHERE``). A git directory may name a ``commondir`` (a worktree's main repository)
    and its object store ``info/alternates`` (other object stores, recursively) and ``info/http-alternates``;
    any symlink inside may lead anywhere. All of them are listed, resolved, for the caller to judge.
    """
    found = [os.path.realpath(path)]
    git_dirs: list[str] = []
    for candidate in (f"{path}/.git", path, f"{path}.git/.git", f"{path}.git"):
        if os.path.isfile(candidate):
            found.append(os.path.realpath(candidate))
            target = _gitfile_target(candidate)
            git_dirs.append(target if target else candidate)
        elif os.path.isdir(candidate):
            git_dirs.append(candidate)
    seen: set[str] = set()
    objects: list[tuple[str, int]] = []
    while git_dirs:
        directory = os.path.realpath(git_dirs.pop())
        if directory in seen:
            continue
        seen.add(directory)
        found.append(directory)
        found.extend(_symlinks_below(directory))
        if common := _read_first_line(os.path.join(directory, "commondir")):
            git_dirs.append(os.path.join(directory, common))
        objects.append((os.path.join(directory, "objects"), 0))
    while objects:
        store, depth = objects.pop()
        found.append(os.path.realpath(store))
        if os.path.realpath(store) not in seen:
            seen.add(os.path.realpath(store))
            found.extend(_symlinks_below(store))
        if _read_first_line(os.path.join(store, "info", "http-alternates")):
            found.append("http-alternates (" + os.path.join(store, "info", "http-alternates") + ")")
        for line in _read_lines(os.path.join(store, "info", "alternates")):
            if line.startswith('"'):  # a C-quoted path: not parsed here, so refused whole
                found.append(f"a quoted alternate ({line})")
            elif depth >= _ALTERNATE_DEPTH:
                found.append(f"alternates nested deeper than {_ALTERNATE_DEPTH} ({store})")
            else:
                objects.append((os.path.join(store, line), depth + 1))
    return found


def _gitfile_target(path: str) -> str:
    line = _read_first_line(path)
    if not line.startswith("gitdir:"):
        return ""
    target = line.removeprefix("gitdir:").strip()
    return os.path.join(os.path.dirname(path), target)


def _read_lines(path: str) -> list[str]:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return []
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _read_first_line(path: str) -> str:
    lines = _read_lines(path) if os.path.isfile(path) else []
    return lines[0] if lines else ""


def _symlinks_below(directory: str) -> list[str]:
    """Where the symlinks under ``directory`` lead (a symlinked ``objects/pack`` reads another repository)."""
    targets = []
    for parent, dirs, files in os.walk(directory):
        for name in (*dirs, *files):
            if os.path.islink(os.path.join(parent, name)):
                targets.append(os.path.realpath(os.path.join(parent, name)))
    return targets
