"""`rag_bench grep PATH`: grep answered from the index against ripgrep over the same files, and its latency.

The tree's files are read as indexing reads them (the walk's include globs,
.gitignore, size and binary rules; sources/reading.py) and their texts stored
under a temporary root (IndexedFile and FileText rows, the rows grep reads; no
chunks or vectors: grep reads none, and embedding a large tree on a CPU takes
half an hour), removed afterwards. ``--root NAME`` measures an indexed root
instead; ``--chunks N`` (no PATH) a tree of the search bench's package files
(measure/bench_corpus.py) copied under var/bench until they make N chunks, so
"the 100k corpus" is the same text for search and grep. For each pattern the
(path, line) set of ``/api/v1/grep`` is compared with ripgrep's over the same
files (documents are left out: their indexed text
is extracted, not their bytes), then latency is measured over HTTP against the
real web server (closed-loop clients, as the search bench).
"""

import http.client
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import cycle
from pathlib import Path

from django.conf import settings
from django.db import connection

from access.identity import identity_anonymous
from access.keys import api_key_create
from kernel.errors import ApplicationError
from measure.bench_corpus import package_texts
from measure.bench_load import REQUEST_TIMEOUT, database_url_for, percentile_ms, web_server
from retrieval.config import FilesLimits
from retrieval.grep import grep_answer
from retrieval.schemas import GrepIn
from sources import walk
from sources.chunking import chunk_text
from sources.config import extract_limits, indexing_config
from sources.file_texts import TextOnly, file_texts_store
from sources.ingest import embedding_model_for
from sources.models import DEFAULT_EXCLUDE_DIRS, DEFAULT_INCLUDE, FileText, IndexedFile, Source, WorkspaceRoot, words
from sources.reading import ReadRules, content_read
from sources.roots import root_path_validate, root_sources, root_sources_sync

RIPGREP = "/usr/bin/rg"
# (pattern, regex): literals and RE2 regexes a developer types, the two among them; "==" has no trigram
# the index can use, so it shows the scan's cost.
PATTERNS: tuple[tuple[str, bool], ...] = (
    ("Cannot resolve keyword", False),
    ("get_queryset", False),
    ("ValidationError(", False),
    ("import os", False),
    ("==", False),
    (r"def get_\w*queryset", True),
    (r"class \w+Form\b", True),
    (r"^\s*raise NotImplementedError", True),
    (r"TODO|FIXME|XXX", True),
    (r"\d{4}-\d{2}-\d{2}", True),
)
_EVERY_MATCH = 10_000_000  # the comparison asks for every line, past the API's cap


@dataclass(frozen=True, slots=True)
class GrepBenchOptions:
    path: Path | None
    root_name: str = ""  # an indexed root instead of PATH
    chunks: int = 0  # a tree of package files making this many chunks instead of PATH
    clients: tuple[int, ...] = (1, 16)
    seconds: float = 10.0


def grep_bench(options: GrepBenchOptions, *, log: Callable[[str], None] = print) -> dict:
    if not Path(RIPGREP).exists():
        raise ApplicationError(f"{RIPGREP} is missing: install Debian's ripgrep (make browser does)")
    temporary = options.root_name == ""
    if temporary:
        tree = grep_tree(options.chunks, log=log) if options.chunks else options.path
        if tree is None:
            raise ApplicationError("rag_bench grep needs a PATH, --chunks N or --root")
        root, stored_seconds = _texts_store(tree.resolve(), log)
    else:
        root = WorkspaceRoot.objects.get(name=options.root_name)
        stored_seconds = 0.0
    try:
        report = {"root": root.name, "path": root.path, "store_seconds": round(stored_seconds, 2)}
        report |= _compare(root, log)
        report["storage_mb"] = _storage_mb()
        report["latency"] = _latency(root, options, log)
        # The machine's other work: on a shared 2-core machine the latencies measure the neighbours too.
        report["load_average"] = [round(load, 2) for load in os.getloadavg()]
        return report
    finally:
        if temporary:
            root_sources(root).delete()
            root.delete()


def grep_tree(chunks: int, *, seed: int = 0, log: Callable[[str], None] = print) -> Path:
    """var/bench/grep-N: the search bench's package files (its order, its seed) copied until the chunker cuts
    ``chunks`` chunks from them; built once, reused. Their paths keep the package (``django/http/response.py``)."""
    tree = Path(settings.VAR_DIR) / "bench" / f"grep-{chunks}-{seed}"
    done = tree / ".complete"
    if done.exists():
        return tree
    if tree.exists():
        shutil.rmtree(tree)  # an earlier build that stopped half way
    started, count, files = time.perf_counter(), 0, 0
    for path, relative, text in package_texts(seed=seed):
        if count >= chunks:
            break
        pieces = chunk_text(text, relative, max_chars=settings.RAG_CHUNK_MAX_CHARS, overlap=settings.RAG_CHUNK_OVERLAP)
        count += sum(1 for piece in pieces if piece.content.strip())
        files += 1
        target = tree / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    if count < chunks:
        raise ApplicationError(f"the installed packages make {count} chunks, fewer than --chunks {chunks}")
    done.write_text(f"{files} files, {count} chunks\n")
    log(f"copied {files} files ({count} chunks) to {tree} in {time.perf_counter() - started:.1f} s")
    return tree


def _texts_store(tree: Path, log: Callable[[str], None]) -> tuple[WorkspaceRoot, float]:
    root_path_validate(str(tree))  # grep opens a root asked for by name: it must be under RAG_ROOT_BASE_DIRS
    model = embedding_model_for(config=indexing_config().embedding)
    root = WorkspaceRoot.objects.create(name=f"grep bench {time.time_ns()}", path=str(tree), reverify_minutes=0)
    root_sources_sync(root=root)
    root.refresh_from_db()
    source = root.source
    assert source is not None
    rules = walk.WalkRules(
        include=tuple(words(DEFAULT_INCLUDE)),
        exclude_dirs=frozenset(words(DEFAULT_EXCLUDE_DIRS)),
        max_file_bytes=root.max_file_bytes,
    )
    read_rules = ReadRules(max_chars=0, overlap=0, limits=extract_limits(), scan_secrets=root.scan_secrets)
    started = time.perf_counter()
    states, texts = [], []
    root_fd = walk.root_open(str(tree))
    try:
        for entry in walk.walk(root_fd, rules):
            if isinstance(entry, walk.Skipped):
                continue
            raw = walk.read_bytes(root_fd, entry, rules)
            content = raw if isinstance(raw, walk.Skipped) else content_read(raw, entry.path, read_rules)
            if isinstance(content, walk.Skipped) or content.document:
                continue  # a document's indexed text is extracted: ripgrep reads its bytes
            states.append(
                IndexedFile(
                    source=source,
                    generation=source.active_generation,
                    path=entry.path,
                    size=entry.size,
                    mtime_ns=entry.mtime_ns,
                    content_hash=content.digest,
                    chunking_version="grep-bench",
                    embedding_model=model,
                )
            )
            texts.append(TextOnly(source, source.active_generation, entry.path, content.text))
    finally:
        os.close(root_fd)
    IndexedFile.objects.bulk_create(states, batch_size=1000)
    file_texts_store(texts)
    with connection.cursor() as cursor:
        # The planner sees the new rows, as autovacuum would, and earlier runs' deleted rows leave the sizes.
        cursor.execute(f"VACUUM ANALYZE {FileText._meta.db_table}")
        cursor.execute(f"VACUUM ANALYZE {IndexedFile._meta.db_table}")
    seconds = time.perf_counter() - started
    log(f"stored the texts of {len(texts)} files of {tree} in {seconds:.1f} s")
    return root, seconds


def _storage_mb() -> dict[str, float]:
    """The stored texts' table (its out-of-line texts included) and their trigram index, every root's (only the
    bench's on a database that holds no other root)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_total_relation_size(%(table)s) - pg_relation_size(%(index)s), pg_relation_size(%(index)s)",
            {"table": FileText._meta.db_table, "index": "file_text_folded_trgm"},
        )
        texts, index = cursor.fetchone()
    return {"texts": round(texts / 1e6, 1), "trigram_index": round(index / 1e6, 1)}


def _indexed_paths(root: WorkspaceRoot) -> list[str]:
    sources = Source.objects.filter(root=root)
    texts = FileText.objects.filter(source__in=sources).values_list("path", flat=True)
    # Documents are left out: their text is extracted, ripgrep reads their bytes.
    return sorted(path for path in set(texts) if Path(root.path, path).is_file())


def _compare(root: WorkspaceRoot, log: Callable[[str], None]) -> dict:
    paths = _indexed_paths(root)
    compared = set(paths)
    limits = FilesLimits.from_settings()
    rows = []
    for pattern, regex in PATTERNS:
        payload = GrepIn.model_construct(
            **GrepIn.model_validate({"pattern": pattern, "regex": regex, "root": root.name}).model_dump()
            | {"max_matches": _EVERY_MATCH}
        )
        started = time.perf_counter()
        answer = grep_answer(identity_anonymous(), payload, limits=limits)
        seconds = time.perf_counter() - started
        ours = {(m.path, m.line) for m in answer.matches if m.path in compared}
        theirs = ripgrep(Path(root.path), paths, pattern, regex=regex)
        rows.append(
            {
                "pattern": pattern,
                "regex": regex,
                "ours": len(ours),
                "ripgrep": len(theirs),
                "files": len({path for path, _ in theirs}),
                "identical": ours == theirs,
                "only_ours": sorted(ours - theirs)[:3],
                "only_ripgrep": sorted(theirs - ours)[:3],
                "stopped": answer.stopped,
                "first_ms": round(seconds * 1000, 1),
            }
        )
        log(f"  {pattern!r:<34} ours {len(ours):>5}  ripgrep {len(theirs):>5}  identical {ours == theirs}")
    return {"files": len(paths), "patterns": rows, "all_identical": all(row["identical"] for row in rows)}


def ripgrep(tree: Path, paths: list[str], pattern: str, *, regex: bool) -> set[tuple[str, int]]:
    """(path, line) of every line ripgrep finds in ``paths`` (relative to ``tree``), case-insensitive as grep's
    default."""
    command = [RIPGREP, "--no-config", "-a", "-i", "-n", "--no-heading", "--with-filename", "--null"]
    command += ([] if regex else ["-F"]) + ["-e", pattern, "--", *paths]
    done = subprocess.run(command, cwd=tree, capture_output=True, check=False)
    if done.returncode not in (0, 1):  # 1: no match
        raise ApplicationError(f"ripgrep failed: {done.stderr.decode(errors='replace')[:300]}")
    found = set()
    for line in done.stdout.decode("utf-8", "replace").splitlines():
        path, _, rest = line.partition("\0")
        found.add((path, int(rest.split(":", 1)[0])))
    return found


def _latency(root: WorkspaceRoot, options: GrepBenchOptions, log: Callable[[str], None]) -> dict:
    key_row, raw = api_key_create(name="rag_bench grep", rate_limit_per_minute=0)
    database_url = database_url_for(os.environ["DATABASE_URL"], connection.settings_dict["NAME"])
    results = {}
    try:
        with web_server(database_url=database_url, log_path=settings.VAR_DIR / "log" / "bench-web.log") as url:
            _clients_run(url, raw, root.name, clients=2, seconds=3.0)  # warm-up: each worker's first request
            for clients in options.clients:
                seconds, errors, elapsed = _clients_run(url, raw, root.name, clients=clients, seconds=options.seconds)
                results[str(clients)] = {
                    "requests": len(seconds),
                    "errors": errors,
                    "p50_ms": percentile_ms(seconds, 50),
                    "p95_ms": percentile_ms(seconds, 95),
                    "qps": round(len(seconds) / elapsed, 1) if elapsed else 0.0,
                }
                log(
                    f"  {clients:>3} clients: p50 {results[str(clients)]['p50_ms']} ms, "
                    f"p95 {results[str(clients)]['p95_ms']} ms, {results[str(clients)]['qps']} q/s, {errors} errors"
                )
    finally:
        key_row.delete()
    return results


def _clients_run(url: str, key: str, root: str, *, clients: int, seconds: float) -> tuple[list[float], int, float]:
    """Closed-loop clients, each cycling through PATTERNS from its own offset; every request's seconds."""
    stop = threading.Event()
    timings: list[float] = []
    errors = [0]
    lock = threading.Lock()
    host, port = url.removeprefix("http://").split(":")
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    def client(offset: int) -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=REQUEST_TIMEOUT)
        patterns = cycle(PATTERNS[offset % len(PATTERNS) :] + PATTERNS[: offset % len(PATTERNS)])
        try:
            for pattern, regex in patterns:
                if stop.is_set():
                    return
                body = json.dumps({"pattern": pattern, "regex": regex, "root": root, "max_matches": 50})
                started = time.perf_counter()
                try:
                    conn.request("POST", "/api/v1/grep", body=body, headers=headers)
                    response = conn.getresponse()
                    response.read()
                    ok = response.status == 200
                except (OSError, http.client.HTTPException):
                    conn.close()
                    ok = False
                with lock:
                    timings.append(time.perf_counter() - started)
                    errors[0] += not ok
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    stop.wait(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    return timings, errors[0], time.perf_counter() - started
