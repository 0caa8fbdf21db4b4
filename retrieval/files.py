"""Read the indexed files of workspace roots: how a bot checks a citation before quoting it (grep, which answers
from the index, is retrieval/grep.py and shares the scope rule here: ``files_visible``).

The scope rule is search's (``access.identity.scope_for``): a file is
visible when it is indexed in the active generation of a file Source the
caller may see; any other file, and a root with no visible source, answers
404 as if it did not exist. The filesystem safety is indexing's
(``sources.walk``, ``sources.roots``): the root must still be the directory
it was pinned to (409 when its path now leads elsewhere); it is opened as a
directory descriptor, the file below it one component at a time with
O_NOFOLLOW, so a symlink, even one swapped in after indexing, is never
followed; a hard-linked file is served only when its root allows in-root
hard links and its text is still the text indexed; the text is checked like
the indexer checks it (size cap, binary, UTF-8, secrets).
A document (PDF, Office, CSV, an HTML page) is served as its extracted text
(retrieval/documents.py), whose lines its chunks cite, never as its bytes;
only ``file_original`` hands out the bytes, for the viewer's download.
A web root has no directory: its pages are served from the text stored when
they were indexed (sources.models.FileText).
"""

import hashlib
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import F

from access.identity import Identity, scope_for
from access.scope import Scope
from kernel.citations import citation_text, pages_label
from kernel.errors import ApplicationError, Conflict, InvalidInput, NotFound, Unavailable
from kernel.replicas import read_connection
from retrieval.config import FilesLimits
from retrieval.documents import document_text, is_document
from retrieval.schemas import PageOut, ReadOut
from sources import walk
from sources.chunking import language_for
from sources.extract import Anchor, extractor_for
from sources.file_texts import anchors_of
from sources.ingest import content_hash
from sources.models import FileText, IndexedFile, Source, WorkspaceRoot
from sources.roots import RootChanged, root_directory_open

MAX_PATH_CHARS = 1024  # IndexedFile.path's length: no longer path was ever indexed
MISSING = "no longer exists"
_PATH_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_WEB_PAGE = ("http://", "https://")


@dataclass(frozen=True, slots=True)
class VisibleRoot:
    id: int
    name: str
    path: str
    max_file_bytes: int
    scan_secrets: bool
    hard_links_inside: bool
    directory_identity: str
    symlink_target: str
    web_url: str  # a web root: no directory; its pages are served from their stored text


_ROOT_FIELDS = (
    "name",
    "path",
    "max_file_bytes",
    "scan_secrets",
    "hard_links_inside",
    "directory_identity",
    "symlink_target",
    "web_url",
)
_ROOT_COLUMNS = ", ".join(f"r.{name}" for name in _ROOT_FIELDS)


@dataclass(frozen=True, slots=True)
class VisibleFile:
    root: VisibleRoot
    path: str
    size: int
    mtime_ns: int
    content_hash: str
    indexed_at: datetime


@dataclass(frozen=True, slots=True)
class CurrentText:
    text: str  # a document's extracted text, whose lines its chunks cite
    size: int
    mtime_ns: int
    anchors: tuple[Anchor, ...] = ()  # a document's pages, slides or sheets; () for a text file
    document: bool = False  # extracted from a document (PDF, Office, CSV, an HTML page), not read as text

    def anchor_at(self, line: int) -> str:
        """The page, slide or sheet holding ``line``; "" for a text file or a line between pages."""
        return next((a.label for a in self.anchors if a.start_line <= line <= a.end_line), "")

    def anchors_within(self, start: int, end: int) -> list[Anchor]:
        return [a for a in self.anchors if a.start_line <= end and a.end_line >= start]


def path_problem(path: str) -> str | None:
    """Why ``path`` is refused before anything is looked up, or None: only plain relative paths below a root."""
    if not path:
        return "the path is empty"
    if len(path) > MAX_PATH_CHARS:
        return f"the path is longer than {MAX_PATH_CHARS} characters"
    if _PATH_CONTROL.search(path):
        return "the path contains a NUL or control character"
    if path.startswith(_WEB_PAGE):
        return None  # a web root's page is cited by its URL; only a web root has such a path indexed
    if "\\" in path:
        return 'the path contains a backslash: separate directories with "/"'
    if path.startswith("/"):
        return "the path is absolute: give it relative to the root, as search cites it"
    parts = path.split("/")
    if any(part in (".", "..") for part in parts):
        return 'the path has a "." or ".." component: give it relative to the root, without them'
    if "" in parts:
        return 'the path has an empty component ("//" or a trailing "/")'
    return None


def file_lines(text: str) -> list[str]:
    """Lines as citations count them: split on "\\n" only (a CRLF line keeps its "\\r").

    A final newline starts no line.
    """
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def files_visible(
    *,
    scope: Scope,
    root: str | None = None,
    path: str | None = None,
    with_files: bool = True,
) -> tuple[list[VisibleRoot], list[VisibleFile]]:
    """The roots (``root``: a name or id; None: all) with a source in ``scope``, and their indexed files, in one query.

    Files are those of each source's active generation (only ``path`` when
    given; none without ``with_files``), ordered by root name, then path, byte by
    byte (the same order whatever the database's locale).
    """
    where, params = scope.source_sql()
    file_filter = "AND f.path = %(path)s" if path is not None else "" if with_files else "AND FALSE"
    root_filter = "AND (r.name = %(root)s OR r.id = %(root_id)s)" if root is not None else ""
    params.update(path=path, root=root, root_id=_as_id(root) if root is not None else None)
    sql = f"""
        SELECT r.id, {_ROOT_COLUMNS},
               f.path, f.size, f.mtime_ns, f.content_hash, f.indexed_at
        FROM {WorkspaceRoot._meta.db_table} r
        JOIN {Source._meta.db_table} s ON s.root_id = r.id
        LEFT JOIN {IndexedFile._meta.db_table} f
            ON f.source_id = s.id AND f.generation = s.active_generation {file_filter}
        WHERE {where} {root_filter}
        ORDER BY r.name COLLATE "C", f.path COLLATE "C"
    """
    with read_connection().cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    roots: dict[int, VisibleRoot] = {}
    files: dict[tuple[int, str], VisibleFile] = {}
    for root_id, *row in rows:
        visible = roots.setdefault(root_id, VisibleRoot(root_id, *row[: len(_ROOT_FIELDS)]))
        indexed = row[len(_ROOT_FIELDS) :]
        if indexed[0] is not None:
            # While segments are reassigned a path may briefly have two rows: the first one counts.
            files.setdefault((root_id, indexed[0]), VisibleFile(visible, *indexed))
    return list(roots.values()), list(files.values())


def read_answer(
    identity: Identity,
    *,
    root: str,
    path: str,
    start: int = 1,
    end: int | None = None,
    bot_id: str | None = None,
    client_id: str | None = None,
    channels: Iterable[str] | None = None,
    limits: FilesLimits,
) -> ReadOut:
    """Lines ``start``..``end`` (from 1, inclusive) of one indexed file the caller may see, exactly as on disk now."""
    if problem := path_problem(path):
        raise ApplicationError(f"refused: {problem}", details={"field": "path"})
    if start < 1 or (end is not None and end < start):
        raise InvalidInput(
            f"lines {start}-{end} are not a range: start is 1 or more, end not before start",
            details={"field": "end" if start >= 1 else "start"},
        )
    file, current = file_current(
        identity, root=root, path=path, bot_id=bot_id, client_id=client_id, channels=channels, limits=limits
    )
    return _lines_out(file, current, start=start, end=end, limits=limits)


def file_current(
    identity: Identity,
    *,
    root: str,
    path: str,
    bot_id: str | None = None,
    client_id: str | None = None,
    channels: Iterable[str] | None = None,
    limits: FilesLimits,
) -> tuple[VisibleFile, CurrentText]:
    """One indexed file the caller may see, and its whole text as on disk now (read_range and the viewer);
    a document's extracted text."""
    file = file_visible(identity, root=root, path=path, bot_id=bot_id, client_id=client_id, channels=channels)
    return file, _current_or_error(file, limits)


def file_visible(
    identity: Identity,
    *,
    root: str,
    path: str,
    bot_id: str | None = None,
    client_id: str | None = None,
    channels: Iterable[str] | None = None,
) -> VisibleFile:
    """One indexed file the caller may see; NotFound for any other, as for one that does not exist."""
    if problem := path_problem(path):
        raise ApplicationError(f"refused: {problem}", details={"field": "path"})
    scope = scope_for(identity, bot_id=bot_id, client_id=client_id, channels=channels, kinds=[Source.Kind.FILE])
    roots, files = files_visible(scope=scope, root=root, path=path)
    chosen = _root_chosen(roots, root)
    file = next((f for f in files if f.root.id == chosen.id), None)
    if file is None:
        raise NotFound(f"file {path!r} not found in root {chosen.name!r} (only indexed files can be read)")
    return file


def file_original(
    identity: Identity,
    *,
    root: str,
    path: str,
    limits: FilesLimits,
) -> tuple[VisibleFile, bytes]:
    """The bytes of one indexed document the caller may see, for download.

    Only documents: a text file is read through read or the viewer. Only the
    bytes indexed (their SHA-256 is the content hash): those passed the
    extraction and the secret scan; a file changed since waits for the next
    job (409).
    """
    file = file_visible(identity, root=root, path=path)
    if extractor_for(path) is None or file.root.web_url:
        raise NotFound(f"file {path!r} is not a document: only documents are offered for download")
    root_fd = _root_fd(file.root)
    try:
        info = _stat_beneath(root_fd, path)
        if info == MISSING:
            raise NotFound(f"file {path!r} was indexed but no longer exists in root {file.root.name!r}")
        if isinstance(info, str):
            raise InvalidInput(f"file {path!r} cannot be downloaded: {info}", details={"reason": info})
        if refused := _hard_link_refused(file.root, info):
            raise InvalidInput(f"file {path!r} cannot be downloaded: {refused}", details={"reason": refused})
        candidate = walk.Candidate(path, info.st_size, info.st_mtime_ns, info.st_dev, info.st_ino, info.st_nlink)
        raw = walk.read_bytes(root_fd, candidate, _rules(file.root, limits))
    finally:
        os.close(root_fd)
    if isinstance(raw, walk.Skipped):
        raise InvalidInput(f"file {path!r} cannot be downloaded: {raw.reason}", details={"reason": raw.reason})
    if not is_document(path, raw):
        raise NotFound(f"file {path!r} is not a document: only documents are offered for download")
    if hashlib.sha256(raw).hexdigest() != file.content_hash:
        raise Conflict(
            f"file {path!r} changed since it was indexed: only the indexed document is offered; the next index job "
            "reads the new one"
        )
    return file, raw


def files_stat(*, root_id: int, paths: list[str]) -> dict[str, tuple[int, int] | None]:
    """The current (size, mtime_ns) of each path below the root, reached as indexing reaches it.

    None for a path that is missing, unsafe, a symlink or not a regular file,
    and for every path when the root cannot be opened. No scope check: the
    caller passes paths it found in scope.
    """
    found: dict[str, tuple[int, int] | None] = dict.fromkeys(paths)
    root = _root_row(root_id)
    root_fd = _root_open(root) if root is not None else None
    if root is None or root_fd is None:
        return found
    try:
        for path in paths:
            if path_problem(path) is None:
                info = _stat_beneath(root_fd, path)
                if not isinstance(info, str) and not _hard_link_refused(root, info):
                    found[path] = (info.st_size, info.st_mtime_ns)
    finally:
        os.close(root_fd)
    return found


def _as_id(root: str) -> int | None:
    return int(root) if root.isascii() and root.isdigit() and len(root) <= 18 else None


def _root_chosen(roots: list[VisibleRoot], asked: str) -> VisibleRoot:
    # A name wins over an id: a root may well be named "2".
    chosen = next((r for r in roots if r.name == asked), roots[0] if roots else None)
    if chosen is None:
        raise NotFound(f"root {asked!r} not found")
    return chosen


def _root_row(root_id: int) -> VisibleRoot | None:
    row = WorkspaceRoot.objects.filter(pk=root_id).values(*_ROOT_FIELDS).first()
    return VisibleRoot(id=root_id, **row) if row is not None else None


def _root_fd(root: VisibleRoot) -> int:
    """The root's directory descriptor, on indexing's terms (the directory pinned, under RAG_ROOT_BASE_DIRS,
    reached through no symlink); RootChanged (409) when its path leads elsewhere now, Unavailable otherwise."""
    try:
        return root_directory_open(root=root)[0]
    except RootChanged:
        raise
    except (ApplicationError, OSError):
        raise Unavailable(
            f"the directory of root {root.name!r} cannot be opened now (missing, or outside RAG_ROOT_BASE_DIRS)"
        ) from None


def _root_open(root: VisibleRoot) -> int | None:
    try:
        return _root_fd(root)
    except ApplicationError:
        return None


def _hard_link_refused(root: VisibleRoot, info: os.stat_result) -> str | None:
    # Another link of the same file may sit outside the root (ln /etc/passwd docs/passwd.txt).
    if info.st_nlink > 1 and not root.hard_links_inside:
        return f"{walk.HARD_LINK} ({info.st_nlink} links; hard links are not served)"
    return None


def _stat_beneath(root_fd: int, path: str) -> os.stat_result | str:
    """The file's stat, opened below the root without following a symlink, or why not."""
    try:
        fd = walk.open_beneath(root_fd, path, walk.READ)
    except walk.Refused as refused:
        return refused.reason
    except FileNotFoundError:
        return MISSING
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    try:
        info = os.fstat(fd)
    finally:
        os.close(fd)
    return info if stat.S_ISREG(info.st_mode) else "not a regular file"


def _current_text(
    root_fd: int, path: str, root: VisibleRoot, *, indexed_hash: str | None, limits: FilesLimits | None
) -> CurrentText | str:
    """The file's text now, or why it cannot be served (the indexer's own checks, ``walk.read_text``).

    A document (PDF, Office, CSV, an HTML page) is served as its extracted
    text, extracted again under ``limits.extract`` (retrieval/documents.py);
    without ``limits`` a document is not served (context assembly fills no
    gap of one).

    A hard-linked file (allowed by its root) is served only while its text is
    the one indexed (``indexed_hash``), whose links the job counted: a file
    linked elsewhere since waits for the next job.
    """
    if path_problem(path):
        return "unsafe path"  # indexed before the path rules; read refuses it too
    info = _stat_beneath(root_fd, path)
    if isinstance(info, str):
        return info
    if refused := _hard_link_refused(root, info):
        return refused
    candidate = walk.Candidate(path, info.st_size, info.st_mtime_ns, info.st_dev, info.st_ino, info.st_nlink)
    rules = _rules(root, limits)
    raw = walk.read_bytes(root_fd, candidate, rules)
    if isinstance(raw, walk.Skipped):
        return raw.reason
    anchors: tuple[Anchor, ...] = ()
    document = is_document(path, raw)
    if document:
        if limits is None:
            return "a document: its lines are those of its extracted text"
        digest = hashlib.sha256(raw).hexdigest()  # a document's content hash is its bytes' (sources/roots.py)
        extracted = document_text(path, raw, limits=limits.extract, scan_secrets=root.scan_secrets)
        if isinstance(extracted, str):
            return extracted
        text, anchors = extracted.text, tuple(extracted.anchors)
    else:
        decoded = walk.text_decode(raw, path, rules)
        if isinstance(decoded, walk.Skipped):
            return decoded.reason
        text, digest = decoded, content_hash(decoded)
    if info.st_nlink > 1 and digest != indexed_hash:
        return (
            f"{walk.HARD_LINK} ({info.st_nlink} links) changed since it was indexed; the next index job checks it again"
        )
    return CurrentText(text, info.st_size, info.st_mtime_ns, anchors, document=document)


def _rules(root: VisibleRoot, limits: FilesLimits | None) -> walk.WalkRules:
    return walk.WalkRules(
        include=(),
        exclude_dirs=frozenset(),
        max_file_bytes=root.max_file_bytes,
        scan_secrets=root.scan_secrets,
        max_document_bytes=limits.max_document_bytes if limits is not None else 0,
    )


def _current_or_error(file: VisibleFile, limits: FilesLimits) -> CurrentText:
    if file.root.web_url:
        return _stored_text(file)
    root_fd = _root_fd(file.root)
    try:
        current = _current_text(root_fd, file.path, file.root, indexed_hash=file.content_hash, limits=limits)
    finally:
        os.close(root_fd)
    if current == MISSING:
        raise NotFound(f"file {file.path!r} was indexed but no longer exists in root {file.root.name!r}")
    if isinstance(current, str):
        raise InvalidInput(f"file {file.path!r} cannot be read: {current}", details={"reason": current})
    return current


def _stored_text(file: VisibleFile) -> CurrentText:
    """A web page's text as indexed (a web root has no directory to read again): the lines its chunks cite."""
    row = (
        FileText.objects.filter(source__root_id=file.root.id, generation=F("source__active_generation"), path=file.path)
        .values_list("text", "anchors")
        .first()
    )
    if row is None:
        raise Unavailable(
            f"page {file.path!r} of root {file.root.name!r} has no stored text yet: the next index job stores it"
        )
    return CurrentText(row[0], file.size, file.mtime_ns, anchors_of(row[1]))


def _lines_out(file: VisibleFile, current: CurrentText, *, start: int, end: int | None, limits: FilesLimits) -> ReadOut:
    lines = file_lines(current.text)
    if start > len(lines):
        raise InvalidInput(
            f"line {start} is past the end of {file.path!r} ({len(lines)} lines)",
            details={"field": "start", "total_lines": len(lines)},
        )
    cap = limits.read_max_lines
    asked = start + cap - 1 if end is None else end
    last = min(asked, start + cap - 1, len(lines))
    shown, cut = lines_within_chars(lines[start - 1 : last], limits.read_max_chars)
    last = start + len(shown) - 1
    pages = current.anchors_within(start, last)
    return ReadOut(
        root=file.root.name,
        path=file.path,
        start_line=start,
        end_line=last,
        total_lines=len(lines),
        content="\n".join(shown),
        citation=citation_text(file.path, start, last, anchor=pages_label([a.label for a in pages])),
        pages=[PageOut(label=a.label, start_line=a.start_line, end_line=a.end_line) for a in pages],
        truncated=cut or asked - start + 1 > cap,
        language=language_for(file.path),
        indexed_at=file.indexed_at,
        indexed_hash=file.content_hash,
        stale=(current.size, current.mtime_ns) != (file.size, file.mtime_ns),
    )


def lines_within_chars(lines: list[str], cap: int) -> tuple[list[str], bool]:
    """The leading whole lines whose "\\n"-joined text fits in ``cap`` characters, and whether anything was cut.

    At least one line: a first line longer than ``cap`` (minified code) comes back cut at ``cap``.
    """
    used = -1  # the first line has no separator before it
    for count, line in enumerate(lines):
        used += len(line) + 1
        if used > cap:
            return (lines[:count], True) if count else ([line[:cap]], True)
    return lines, False


def files_text(*, root_id: int, paths: list[str]) -> dict[str, CurrentText | None]:
    """The current text (with the size and mtime it was read at) of each path below the root, read as indexing
    reads it; None when it cannot be read.

    No scope check: the caller passes paths it found in scope (context
    assembly fills the lines between two cited ranges of one file).
    """
    found: dict[str, CurrentText | None] = dict.fromkeys(paths)
    root = _root_row(root_id)
    root_fd = _root_open(root) if root is not None else None
    if root is None or root_fd is None:
        return found
    try:
        for path in paths:
            # No indexed hash here: a hard-linked file fills no gap (its cited chunks are still shown).
            current = _current_text(root_fd, path, root, indexed_hash=None, limits=None)
            found[path] = None if isinstance(current, str) else current
    finally:
        os.close(root_fd)
    return found
