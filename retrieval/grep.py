"""Grep answered from the index: exhaustive, over every file the caller may see (``/api/v1/grep``, MCP, the page).

Each indexed file's text is stored beside its chunks (sources.models.FileText,
under a pg_trgm GIN index). A pattern becomes the literals every matching
line holds (retrieval/grep_plan.py); PostgreSQL's trigram index rules out the
files without them, and RE2 checks the lines of the rest, in (root name,
path, line) order, as zoekt and Sourcegraph answer from a trigram index.

No time limit: a pattern with a usable plan is answered over every file. One
without (``.*``, ``a``, ``==``: no three letters or digits in a row the index
can use) is scanned in file order, up to ``limits.grep_scan_files`` files
(RAG_GREP_SCAN_FILES): the answer then says ``"stopped": "scan limit"`` and
"searched N of M files" in its counts, and the caller narrows by root, glob,
language or a longer pattern.

The text searched is the text indexed, the lines the chunks cite: a file
changed on disk since is found as it was until the next index job (read
verifies a file against the disk; grep does not read it). Files indexed
before texts were stored have none until their next index job, which stores
it without embedding again; they are counted in ``files_skipped``.
"""

import fnmatch
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import re2
from django.db import transaction

from access.identity import Identity, scope_for
from access.scope import Scope
from kernel.citations import citation_text
from kernel.errors import InvalidInput
from kernel.replicas import read_alias, read_connection
from retrieval.config import FilesLimits
from retrieval.files import VisibleRoot, _root_chosen, _root_fd, file_lines, files_visible
from retrieval.grep_plan import GrepPlan, grep_plan
from retrieval.schemas import GrepIn, GrepMatchOut, GrepOut
from sources.chunking import language_for
from sources.file_texts import anchors_of
from sources.models import FileText, IndexedFile, Source

GREP_LINE_CHARS = 400  # one minified line must not fill the answer
_TEXTS_PER_FETCH = 64  # texts read per query: the answer stops at max_matches without reading the rest
# A regex without text anchors (\A, \z) or a flag group turning a flag off
# (e.g. "(?-m)") that matches a line also matches the whole text under (?m),
# so one search of the whole text rules a file out before it is split.
_NOT_LINE_LOCAL = re2.compile(r"\\[Az]|\(\?[a-zA-Z]*-")


@dataclass(frozen=True, slots=True)
class _Listed:
    root: VisibleRoot
    path: str
    text_id: int | None  # None: indexed before texts were stored, none yet


@dataclass(frozen=True, slots=True)
class GrepMatcher:
    line: Callable[[str], object]
    text: Callable[[str], object] | None  # a whole-file pre-check, None when it could miss a line's match
    # The whole-file search over UTF-8 bytes from a byte offset (None where ``text`` is): it finds the next line
    # that may match without splitting the file or encoding it again per line (google-re2 encodes a str per call).
    scan: Callable[[bytes, int], "re2._Match | None"] | None = None


def grep_matcher(*, pattern: str, regex: bool, case_sensitive: bool) -> GrepMatcher:
    """``pattern`` compiled with RE2 (linear time: no pattern can backtrack for ever); 422 when RE2 refuses it."""
    options = re2.Options()
    options.log_errors = False  # a bad pattern is the caller's mistake, answered with 422, not a server log line
    options.case_sensitive = case_sensitive
    options.literal = not regex
    try:
        line = re2.compile(pattern, options)
        text = (
            line if not regex else None if _NOT_LINE_LOCAL.search(pattern) else re2.compile("(?m)" + pattern, options)
        )
        scan = None if text is None else re2.compile(text.pattern.encode("utf-8"), options)
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise InvalidInput(
            f"invalid regex (RE2 syntax: no backreferences or lookaround): {reason}", details={"field": "pattern"}
        ) from None
    return GrepMatcher(
        line=line.search,
        text=text.search if text is not None else None,
        scan=scan.search if scan is not None else None,
    )


def grep_answer(identity: Identity, payload: GrepIn, *, limits: FilesLimits) -> GrepOut:
    """The lines of the indexed files the caller may see that match ``payload.pattern``, in (root name, path, line)
    order, to ``max_matches``; over every file, or up to RAG_GREP_SCAN_FILES when the pattern has no usable plan."""
    matcher = grep_matcher(pattern=payload.pattern, regex=payload.regex, case_sensitive=payload.case_sensitive)
    plan = grep_plan(pattern=payload.pattern, regex=payload.regex, case_sensitive=payload.case_sensitive)
    scope = scope_for(
        identity,
        bot_id=payload.bot_id,
        client_id=payload.client_id,
        channels=payload.channels,
        kinds=[Source.Kind.FILE],
    )
    roots, _ = files_visible(scope=scope, root=payload.root, with_files=False)
    if payload.root is not None:
        chosen = _root_chosen(roots, payload.root)
        roots = [chosen]
        if not chosen.web_url:
            os.close(_root_fd(chosen))  # a root asked for by name that is no longer its directory is refused
    if payload.glob is None and payload.lang is None:
        chosen_files = _chosen_in_sql(scope, roots, plan, scan_files=limits.grep_scan_files)
    else:
        chosen_files = _chosen_listed(scope, roots, plan, payload, scan_files=limits.grep_scan_files)
    scan_limited = not plan.indexed and chosen_files.with_text > limits.grep_scan_files
    searched = min(chosen_files.with_text, limits.grep_scan_files) if scan_limited else chosen_files.with_text
    matches: list[GrepMatchOut] = []
    stopped: str | None = "scan limit" if scan_limited else None
    for file, _, number, line, anchor in _matching_lines(chosen_files.files, matcher):
        if len(matches) == payload.max_matches:
            stopped = "max matches"  # one more match than asked for: there are more
            searched = chosen_files.position(file)  # the files up to this one, in order
            break
        matches.append(
            GrepMatchOut.model_construct(  # typed here already: validated once, when the answer is rendered
                root=file.root.name,
                path=file.path,
                line=number,
                text=line[:GREP_LINE_CHARS],
                citation=citation_text(file.path, number, number, anchor=anchor),
                page=anchor or None,
            )
        )
    return GrepOut(
        pattern=payload.pattern,
        matches=matches,
        files_searched=searched,
        files_total=chosen_files.total,
        files_skipped=chosen_files.total - chosen_files.with_text,
        truncated=stopped is not None,
        stopped=stopped,  # type: ignore[arg-type]  # one of the schema's literals
        message=_message(plan, searched=searched, total=chosen_files.total, scan_limited=scan_limited),
    )


def _message(plan: GrepPlan, *, searched: int, total: int, scan_limited: bool) -> str:
    if scan_limited:
        return (
            f"searched {searched} of {total} files: the pattern has no three letters or digits in a row the index "
            "can use, so files are scanned up to RAG_GREP_SCAN_FILES; narrow it (a longer literal, root, glob or "
            "lang) to search them all"
        )
    return ""


@dataclass(frozen=True, slots=True)
class _Chosen:
    """The files grep reads, in (root name, path) order, with their texts' ids; how many files the caller may see
    (``total``) and how many of them have a stored text; ``position``: how many of those come up to a file, in
    order (files_searched when the answer stops there)."""

    files: list[tuple[_Listed, int]]
    total: int
    with_text: int
    position: Callable[[_Listed], int]


def _chosen_in_sql(scope: Scope, roots: list[VisibleRoot], plan: GrepPlan, *, scan_files: int) -> _Chosen:
    """Without glob or lang: the candidate files (or, with no plan, the first ``scan_files`` files with a text), each
    with its place among the files with a text, and the counts, in one query, in order, without listing every file
    the caller may see in Python (7,000 rows per request at 100k chunks)."""
    where, params = scope.source_sql()
    by_id = {root.id: root for root in roots}
    params["grep_roots"] = list(by_id)  # in files_visible's order: by root name, byte by byte
    if plan.indexed:
        params["grep_ids"] = sorted(_candidates(scope, list(by_id), plan))
        chosen = "text_id = ANY(%(grep_ids)s::bigint[])"
    else:
        chosen = "text_id IS NOT NULL AND place <= %(grep_limit)s"
        params["grep_limit"] = scan_files
    # The candidates first (their own query: it alone needs the planner kept off a sequential scan), then every
    # visible file in order, numbered among those with a text (``place``: files_searched when the answer stops at
    # that file), the chosen ones returned. The first row comes too, chosen or not, so the counts come with an
    # answer that has no candidate. While segments are reassigned a path may briefly have two rows: the counts may
    # then be one off; the files read are each read once.
    sql = f"""
        SELECT root_id, path, text_id, place, total, with_text, {chosen} AS chosen FROM (
            SELECT s.root_id, f.path, t.id AS text_id,
                count(t.id) OVER (ORDER BY array_position(%(grep_roots)s::bigint[], s.root_id), f.path COLLATE "C"
                    ROWS UNBOUNDED PRECEDING) AS place,
                row_number() OVER (ORDER BY array_position(%(grep_roots)s::bigint[], s.root_id), f.path COLLATE "C")
                    AS n,
                count(*) OVER () AS total,
                count(t.id) OVER () AS with_text
            FROM {Source._meta.db_table} s
            JOIN {IndexedFile._meta.db_table} f ON f.source_id = s.id AND f.generation = s.active_generation
            LEFT JOIN {FileText._meta.db_table} t
                ON t.source_id = f.source_id AND t.generation = f.generation AND t.path = f.path
            WHERE {where} AND s.root_id = ANY(%(grep_roots)s::bigint[])
        ) listed
        WHERE {chosen} OR n = 1
        ORDER BY n
    """
    with read_connection().cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    total = rows[0][4] if rows else 0
    with_text = rows[0][5] if rows else 0
    files: dict[tuple[int, str], tuple[_Listed, int]] = {}
    places: dict[tuple[int, str], int] = {}
    for root_id, path, text_id, place, _, _, is_chosen in rows:
        if is_chosen and (root_id, path) not in files:
            files[(root_id, path)] = (_Listed(by_id[root_id], path, text_id), text_id)
            places[(root_id, path)] = place
    return _Chosen(list(files.values()), total, with_text, lambda file: places[(file.root.id, file.path)])


def _chosen_listed(
    scope: Scope, roots: list[VisibleRoot], plan: GrepPlan, payload: GrepIn, *, scan_files: int
) -> _Chosen:
    """With glob or lang: every file the caller may see, listed and filtered here, then the candidates among them."""
    files = _files_listed(scope, roots)
    if payload.glob is not None:
        files = [f for f in files if fnmatch.fnmatchcase(f.path, payload.glob)]
    if payload.lang is not None:
        files = [f for f in files if language_for(f.path) == payload.lang]
    with_text = [(f, f.text_id) for f in files if f.text_id is not None]
    if plan.indexed:
        candidates = _candidates(scope, [r.id for r in roots], plan)
        chosen = [(f, text_id) for f, text_id in with_text if text_id in candidates]
    else:
        chosen = with_text[:scan_files]
    position = {(f.root.id, f.path): n for n, (f, _) in enumerate(with_text, start=1)}
    return _Chosen(chosen, len(files), len(with_text), lambda file: position[(file.root.id, file.path)])


def _files_listed(scope: Scope, roots: list[VisibleRoot]) -> list[_Listed]:
    """The indexed files of ``roots`` in ``scope`` (files_visible's rule: each source's active generation), each
    with its stored text's id, in (root name, path) order; only what grep needs of them, in one query."""
    where, params = scope.source_sql()
    sql = f"""
        SELECT s.root_id, f.path, t.id
        FROM {Source._meta.db_table} s
        JOIN {IndexedFile._meta.db_table} f ON f.source_id = s.id AND f.generation = s.active_generation
        LEFT JOIN {FileText._meta.db_table} t
            ON t.source_id = f.source_id AND t.generation = f.generation AND t.path = f.path
        WHERE {where} AND s.root_id = ANY(%(grep_roots)s::bigint[])
        ORDER BY f.path COLLATE "C"
    """
    by_id = {root.id: root for root in roots}
    with read_connection().cursor() as cursor:
        cursor.execute(sql, {**params, "grep_roots": list(by_id)})
        rows = cursor.fetchall()
    files: dict[tuple[int, str], _Listed] = {}
    for root_id, path, text_id in rows:
        # While segments are reassigned a path may briefly have two rows: the first one counts.
        files.setdefault((root_id, path), _Listed(by_id[root_id], path, text_id))
    order = {root.id: n for n, root in enumerate(roots)}  # files_visible's: by root name, byte by byte
    return sorted(files.values(), key=lambda f: order[f.root.id])  # stable: paths stay in order within a root


def _literals_sql(plan: GrepPlan) -> tuple[str, dict]:
    """The plan as a condition on stored texts ``t``: one LIKE of every clause, over the folded text."""
    conditions, params = [], {}
    for i, clause in enumerate(plan.clauses):
        alternatives = []
        for j, like in enumerate(clause):
            params[f"grep_{i}_{j}"] = like
            alternatives.append(f"t.folded LIKE %(grep_{i}_{j})s")
        conditions.append("(" + " OR ".join(alternatives) + ")")
    return " AND ".join(conditions), params


def _candidates(scope: Scope, root_ids: list[int], plan: GrepPlan) -> set[int]:
    """The stored texts holding one literal of every clause: what pg_trgm's GIN index lets through."""
    where, params = scope.source_sql()
    literals, literal_params = _literals_sql(plan)
    # The literals first, on the texts alone (MATERIALIZED: the planner may not fold the scope into it and walk
    # a source's texts by its unique index instead, reading every one), then the scope.
    sql = f"""
        WITH matched AS MATERIALIZED (
            SELECT t.id, t.source_id, t.generation FROM {FileText._meta.db_table} t WHERE {literals}
        )
        SELECT t.id
        FROM matched t
        JOIN {Source._meta.db_table} s ON s.id = t.source_id AND t.generation = s.active_generation
        WHERE {where} AND s.root_id = ANY(%(grep_roots)s::bigint[])
    """
    with transaction.atomic(using=read_alias()), read_connection().cursor() as cursor:
        # The planner prices a sequential scan by the table's pages, not by the texts stored out of line that each
        # row's LIKE reads: on Django's source it chose it (140-240 ms for one literal, every text read) over the
        # trigram index, which reads the folded texts of the candidate files only.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(sql, {**params, **literal_params, "grep_roots": root_ids})
        found = {row[0] for row in cursor.fetchall()}
        cursor.execute("RESET enable_seqscan")  # within a request's own transaction, for this query only
    return found


def _matching_lines(
    files: list[tuple[_Listed, int]], matcher: GrepMatcher
) -> Iterator[tuple[_Listed, int, int, str, str]]:
    """(file, text id, line number, line, its page) of every matching line, in the files' order; a document's lines
    numbered as its chunks cite them."""
    start, size = 0, 8
    while start < len(files):
        # Small first: an answer that fills max_matches from its first files reads few texts; then larger.
        part = files[start : start + size]
        start, size = start + size, min(2 * size, _TEXTS_PER_FETCH)
        with read_connection().cursor() as cursor:
            cursor.execute(
                f"SELECT id, text, anchors FROM {FileText._meta.db_table} WHERE id = ANY(%s::bigint[])",
                [[text_id for _, text_id in part]],
            )
            texts = {text_id: (text, anchors) for text_id, text, anchors in cursor.fetchall()}
        for file, text_id in part:
            if text_id not in texts:
                continue  # replaced by a job since the list was read: the next grep finds its new text
            text, stored = texts[text_id]
            anchors = anchors_of(json.loads(stored) if isinstance(stored, str) else stored)
            lines = _lines_scanned(text, matcher) if matcher.scan is not None else _lines_each(text, matcher)
            for number, line in lines:
                page = next((a.label for a in anchors if a.start_line <= number <= a.end_line), "")
                yield file, text_id, number, line, page


def _lines_each(text: str, matcher: GrepMatcher) -> Iterator[tuple[int, str]]:
    """(number, line) of each matching line, every line tried (a regex whose matches depend on the text's ends)."""
    if matcher.text is not None and not matcher.text(text):
        return
    for number, line in enumerate(file_lines(text), start=1):
        if matcher.line(line):
            yield number, line


def _lines_scanned(text: str, matcher: GrepMatcher) -> Iterator[tuple[int, str]]:
    """(number, line) of each matching line: the whole-file search jumps to the next line that may match, the
    line's own search decides (a match of the whole file may run past its line; one of a line is always one of
    the whole file, starting at the same place, under (?m)). Lines as ``file_lines`` counts them."""
    assert matcher.scan is not None
    data = text.encode("utf-8", "surrogatepass")
    position, number, start = 0, 1, 0  # ``number`` is the line beginning at byte ``start``
    while (found := matcher.scan(data, position)) is not None:
        at = found.start()
        number += data.count(b"\n", start, at)
        start = data.rfind(b"\n", 0, at) + 1
        if start == len(data):
            return  # past the last newline: no line there (a final newline starts none)
        end = data.find(b"\n", at)
        end = len(data) if end < 0 else end
        line = data[start:end].decode("utf-8", "surrogatepass")
        if matcher.line(line):
            yield number, line
        position = start = end + 1
        number += 1
        if position > len(data):
            return
