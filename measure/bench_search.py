"""`rag_bench search`: the real search service, over HTTP, on a corpus of N chunks.

Steps: build or reuse the corpus (measure/bench_corpus.py); start gunicorn
the way `make run` does, on a free port, against the same database (or use
a running server); warm it up (each web worker loads the model on its first
query); for every mode and client count, closed-loop clients send the
seeded query mix (measure/bench_queries.py) for S seconds; then, in this
process, HNSW recall and lexical agreement against exact search
(measure/bench_accuracy.py), and optionally the contention run.
"""

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import cycle
from typing import Any

from django.conf import settings
from django.db import connection

from access.identity import identity_for_key, scope_for
from access.keys import api_key_authenticate, api_key_create
from access.scope import Scope
from kernel.errors import ApplicationError
from measure import bench_accuracy, bench_bulk
from measure.bench_corpus import BENCH_BOT, bench_corpus_ensure, held_out_vectors
from measure.bench_load import Stream, clients_run, database_url_for, percentile_ms, samples_summary, web_server
from measure.bench_queries import WORST_CASE, QueryKind, queries_of, query_stream
from retrieval.search import Mode

WARMUP_SECONDS = 3.0
CONTENTION_CLIENTS = 4  # worst-case senders beside the one normal client
CONTENTION_TARGET = 2.0  # loaded p95 / idle p95 (DESIGN.md)


@dataclass(frozen=True, slots=True)
class SearchBenchOptions:
    chunks: int
    clients: tuple[int, ...] = (1, 16)
    seconds: float = 10.0
    modes: tuple[Mode, ...] = (Mode.HYBRID, Mode.LEXICAL, Mode.VECTOR)
    contention: bool = False
    url: str = ""  # a running server; empty: start one
    key: str = ""  # with url: an API key of bot rag-bench
    embedded: int | None = None  # chunks embedded for real; None: bench_corpus.EMBEDDED_DEFAULT
    seed: int = 0
    explain: bool = False
    replica_outage: bool = False  # also: the embedded replica stopped under 8 clients (measure/bench_replica.py)
    ef_sweep: tuple[int, ...] = ()  # HNSW recall at each of these ef_search values too
    build_only: bool = False  # build or reuse the corpus, report its build and disk, measure nothing

    def __post_init__(self) -> None:
        if self.chunks < 1:
            raise ApplicationError(f"--chunks must be at least 1, got {self.chunks}")
        if not self.clients or min(self.clients) < 1:
            raise ApplicationError("--clients needs one or more counts of at least 1, e.g. 1,16")
        if self.seconds <= 0:
            raise ApplicationError(f"--seconds must be positive, got {self.seconds}")
        if bool(self.url) != bool(self.key):
            raise ApplicationError("--url and --key go together: a running server and an API key of bot rag-bench")


def database_is_embedded() -> bool:
    """Whether the database is this checkout's embedded one (var/postgres), where the bench may write freely."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('data_directory')")
            data_directory = cursor.fetchone()[0]
    except Exception:  # noqa: BLE001 - not allowed to read it: not ours
        return False
    return os.path.realpath(data_directory) == os.path.realpath(settings.VAR_DIR / "postgres")


def search_bench(options: SearchBenchOptions, *, log: Callable[[str], None] = print) -> dict:
    corpus = bench_corpus_ensure(
        chunks=options.chunks,
        embedded=options.embedded,
        seed=options.seed,
        bulk_allowed=database_is_embedded(),
        log=log,
    )
    log(f"corpus {corpus.source.key}: {'built' if corpus.built else 'reused'} in {corpus.seconds['total']:.1f} s")
    report: dict = {
        "chunks": corpus.chunks,
        "corpus": corpus.as_dict() | {"disk": bench_bulk.disk_usage()},
        "seconds": options.seconds,
        "server": {"workers": None, "threads": None, "url": options.url or None},
        "replicas": len(settings.DATABASES) - 1,
    }
    if options.build_only:
        return report
    key_row = None
    if options.key:
        raw = options.key
        scope = scope_for(identity_for_key(api_key_authenticate(raw)))
        if scope.bot_ids is not None and BENCH_BOT not in scope.bot_ids:
            raise ApplicationError(
                f"the key does not see bot {BENCH_BOT}'s corpus; create one with "
                f"`manage.py rag_apikey create bench --bot-id {BENCH_BOT} --rate-limit 0`"
            )
    else:
        key_row, raw = api_key_create(name="rag_bench search", bot_id=BENCH_BOT, rate_limit_per_minute=0)
        scope = scope_for(identity_for_key(key_row))
    try:
        if options.url:
            report |= _load(options.url, raw, options, log)
        else:
            database_url = database_url_for(os.environ["DATABASE_URL"], connection.settings_dict["NAME"])
            with web_server(database_url=database_url, log_path=settings.VAR_DIR / "log" / "bench-web.log") as url:
                report["server"] |= {"workers": settings.RAG_WEB_WORKERS, "threads": settings.RAG_WEB_THREADS}
                report |= _load(url, raw, options, log)
    finally:
        if key_row is not None:
            key_row.delete()
    log("measuring HNSW recall and lexical agreement against exact search ...")
    held_out = held_out_vectors(chunks=options.chunks, embedded=options.embedded, seed=options.seed)
    report["accuracy"] = _accuracy(corpus.source.embedding_model, scope, held_out=held_out, ef_sweep=options.ef_sweep)
    if options.explain:
        report["explain"] = {"lexical_worst_case": lexical_plan(WORST_CASE, scope)}
    return report


def _load(url: str, key: str, options: SearchBenchOptions, log: Callable[[str], None]) -> dict:
    log(f"warming up {url} for {WARMUP_SECONDS:.0f} s (each web worker loads the model on its first query) ...")
    warm = [_stream(options.seed + 10_000 + i, Mode.HYBRID) for i in range(2 * settings.RAG_WEB_THREADS)]
    clients_run(url=url, key=key, streams=warm, seconds=WARMUP_SECONDS)
    results: dict[str, dict[str, dict]] = {}
    for mode in options.modes:
        for clients in options.clients:
            streams = [_stream(options.seed * 1000 + i, mode) for i in range(clients)]
            samples, elapsed = clients_run(url=url, key=key, streams=streams, seconds=options.seconds)
            summary = samples_summary(samples, elapsed)
            results.setdefault(mode.value, {})[str(clients)] = summary
            log(
                f"  {mode.value:<8} {clients:>3} clients: p50 {summary['p50_ms']} ms, p95 {summary['p95_ms']} ms, "
                f"{summary['qps']} q/s, {summary['errors']} errors"
            )
    report = {"results": results}
    if options.contention:
        report["contention"] = _contention(url, key, options, log)
    if options.replica_outage:
        from measure.bench_replica import replica_outage
        from rag_site.embedded_replica import replica_dir

        report["replica_outage"] = replica_outage(
            url=url,
            key=key,
            primary_dir=settings.VAR_DIR / "postgres",
            data_dir=replica_dir(settings.VAR_DIR, 1),
            seconds=options.seconds,
            seed=options.seed,
            log=log,
        )
    return report


def _stream(seed: int, mode: Mode, kinds: tuple[QueryKind, ...] | None = None) -> Stream:
    stream = query_stream(seed=seed) if kinds is None else query_stream(seed=seed, kinds=kinds)
    return ((kind, query, mode.value) for kind, query in stream)


def _contention(url: str, key: str, options: SearchBenchOptions, log: Callable[[str], None]) -> dict:
    """One client's hybrid questions, idle and then beside worst-case senders (lexical and hybrid in turn)."""
    log(f"contention: one client's questions, idle, then beside {CONTENTION_CLIENTS} worst-case clients ...")
    idle, _ = clients_run(
        url=url, key=key, streams=[_stream(options.seed, Mode.HYBRID, (QueryKind.QUESTION,))], seconds=options.seconds
    )
    stop = threading.Event()
    worst: dict = {}
    modes = (Mode.LEXICAL.value, Mode.HYBRID.value)
    streams = [
        ((QueryKind.LONG, WORST_CASE, mode) for mode in cycle(modes[i % 2 :] + modes[: i % 2]))
        for i in range(CONTENTION_CLIENTS)
    ]
    senders = threading.Thread(
        target=lambda: worst.update(samples=clients_run(url=url, key=key, streams=streams, stop=stop)[0])
    )
    senders.start()
    time.sleep(min(1.0, options.seconds / 4))  # let the worst-case queries get going first
    try:
        loaded, _ = clients_run(
            url=url,
            key=key,
            streams=[_stream(options.seed, Mode.HYBRID, (QueryKind.QUESTION,))],
            seconds=options.seconds,
        )
    finally:
        stop.set()
        senders.join()
    idle_p95 = percentile_ms([s.seconds for s in idle], 95)
    loaded_p95 = percentile_ms([s.seconds for s in loaded], 95)
    samples = worst.get("samples", [])
    report = {
        "idle": {
            "requests": len(idle),
            "p50_ms": percentile_ms([s.seconds for s in idle], 50),
            "p95_ms": idle_p95,
            "errors": sum(1 for s in idle if s.status != 200),
        },
        "loaded": {
            "requests": len(loaded),
            "p50_ms": percentile_ms([s.seconds for s in loaded], 50),
            "p95_ms": loaded_p95,
            "errors": sum(1 for s in loaded if s.status != 200),
        },
        "p95_ratio": round(loaded_p95 / idle_p95, 2) if idle_p95 else None,
        "target_ratio": CONTENTION_TARGET,
        "worst_case": {
            "clients": CONTENTION_CLIENTS,
            "answered": sum(1 for s in samples if s.status == 200 and not s.warnings),
            "warned": sum(1 for s in samples if s.status == 200 and s.warnings),
            "failed": sum(1 for s in samples if s.status != 200),
            "p50_ms": percentile_ms([s.seconds for s in samples], 50),
            "by_mode": {mode: sum(1 for s in samples if s.mode == mode) for mode in modes},
        },
    }
    log(
        f"  idle p95 {idle_p95} ms, loaded p95 {loaded_p95} ms: ratio {report['p95_ratio']} "
        f"(target <= {CONTENTION_TARGET})"
    )
    return report


def _accuracy(model, scope: Scope, *, held_out, ef_sweep: tuple[int, ...]) -> dict:
    vector_queries = [q for kind in QueryKind for q in queries_of(kind)]
    lexical_queries = {
        kind: list(queries_of(kind)) for kind in (QueryKind.QUESTION, QueryKind.IDENTIFIER, QueryKind.COMMON)
    }
    lexical_queries[QueryKind.LONG] = list(queries_of(QueryKind.LONG)[:4])
    return {
        "hnsw_recall_at_10": bench_accuracy.hnsw_recall(
            queries=vector_queries, model=model, scope=scope, ef_searches=ef_sweep
        ),
        # Real text vectors as queries (chunks whose place in the corpus holds a mixture): the index's recall
        # for a query that lies where real vectors do, beside the query mix's.
        "hnsw_recall_at_10_held_out": bench_accuracy.hnsw_recall(
            queries=[], vectors=held_out, model=model, scope=scope, ef_searches=ef_sweep
        )
        if len(held_out)
        else None,
        "lexical_agreement_at_10": bench_accuracy.lexical_agreement(
            queries=[q for qs in lexical_queries.values() for q in qs],
            scope=scope,
            by_kind={kind.value: qs for kind, qs in lexical_queries.items()},
        ),
    }


def lexical_plan(query: str, scope: Scope) -> list[str]:
    """EXPLAIN (ANALYZE, BUFFERS) of the lexical channel's main statement for ``query``, as PostgreSQL prints it."""
    from retrieval.lexical import lexical_candidates

    statements: list[tuple[str, Any]] = []

    def capture(execute, sql, params, many, context):
        statements.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        lexical_candidates(query=query, scope=scope, limit=settings.RAG_SEARCH_CANDIDATES)
    sql, params = statements[-1]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
        return [row[0] for row in cursor.fetchall()]
