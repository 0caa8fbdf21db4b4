"""The counters and histograms every package records into; `/metrics` (surfaces/metrics.py) exposes them.

Recording is a few in-memory (or, under gunicorn and Celery, memory-mapped)
additions: no database, no Redis, nothing that can fail a request. What is
read from the database or the broker (jobs by state, queue depth, breaker
state, connections) is measured at scrape time by the surface instead.

Several processes (gunicorn's workers, Celery's pool, the watcher) each
write their own files under ``PROMETHEUS_MULTIPROC_DIR`` when it is set
(prometheus-client's multiprocess mode; `make run` sets it to
``RAG_VAR_DIR/metrics`` and empties it at start), and a scrape sums them.
That variable is prometheus-client's own, read by it at import: it is not a
rag-site setting.
"""

import os
import shutil
import socket
from pathlib import Path

from prometheus_client import Counter, Histogram, disable_created_metrics, values

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def _process_identifier() -> str:
    # The host name too: compose's containers share one directory (a volume), and each numbers its processes from 1.
    return f"{socket.gethostname()}-{os.getpid()}"


# A `_created` timestamp per series doubles the single-process scrape for nothing: rate() needs no start time
# (multiprocess mode has none anyway).
disable_created_metrics()

# Before any metric exists: each metric takes its value class when it is made.
if os.environ.get(MULTIPROC_ENV):
    values.ValueClass = values.MultiProcessValue(process_identifier=_process_identifier)


def multiprocess_dir() -> str | None:
    """The directory every process writes its metrics to, or None in single-process mode (tests, runserver)."""
    return os.environ.get(MULTIPROC_ENV) or None


def multiprocess_dir_reset(path: Path) -> Path:
    """Empty ``path`` (a previous run's files would be summed with this run's), before any process writes to it."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True, exist_ok=True)
    return path


def process_dead(pid: int | None = None) -> None:
    """A worker process exited (gunicorn's child_exit, Celery's worker_process_shutdown): its live gauges go.

    Its counters and histograms stay: a scrape keeps summing what it counted.
    """
    directory = multiprocess_dir()
    if directory is None:
        return
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(f"{socket.gethostname()}-{pid or os.getpid()}", directory)


# Latency buckets in seconds: search's targets are p50 15 ms and p95 40-60 ms (docs/benchmarks.md), so the
# buckets are dense there; the long tail reaches the statement timeout and gunicorn's 120 s.
LATENCY_BUCKETS = (0.002, 0.005, 0.01, 0.015, 0.025, 0.04, 0.06, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0)

HTTP_REQUESTS = Counter(
    "rag_http_requests",
    "HTTP requests answered, by URL route (the pattern, never the raw path), method and status.",
    ["route", "method", "status"],
)
HTTP_DURATION = Histogram(
    "rag_http_request_duration_seconds",
    "Time from the request reaching Django to its response, by URL route.",
    ["route"],
    buckets=LATENCY_BUCKETS,
)
SEARCH_DURATION = Histogram(
    "rag_search_duration_seconds",
    "Whole searches (chunks_search), by mode: hybrid, lexical or vector.",
    ["mode"],
    buckets=LATENCY_BUCKETS,
)
SEARCH_STAGE = Histogram(
    "rag_search_stage_seconds",
    "Time per search stage, as the Server-Timing header reports it (retrieval.search.STAGES).",
    ["stage"],
    buckets=LATENCY_BUCKETS,
)
SEARCH_CHANNEL_SKIPPED = Counter(
    "rag_search_channel_skipped",
    "Search channels left out of an answer, by channel (lexical, vector) and reason (timeout, error).",
    ["channel", "reason"],
)
QUERY_EMBEDDING_CACHE = Counter(
    "rag_query_embedding_cache",
    "Query embeddings served from the per-process cache (hit) or computed (miss).",
    ["result"],
)
CHUNKS_EMBEDDED = Counter(
    "rag_chunks_embedded",
    "Chunks embedded at index time, by embedding model; rate() gives chunks per second.",
    ["model"],
)
BROKER_WAITS = Counter(
    "rag_broker_waits",
    "Work that could not be sent to the broker and waits for the recovery sweep, by kind (skill, tool, ...).",
    ["kind"],
)
LLM_CALLS = Counter(
    "rag_llm_calls",
    "Language-model HTTP attempts (retries included) by model and outcome: ok, an error class "
    "(kernel.llm.ErrorKind), or cooldown (skipped: the breaker was open).",
    ["model", "outcome"],
)


def search_observe(*, mode: str, timings_ms: dict[str, float]) -> None:
    """One search: its whole time by mode, and each stage it went through (``timings_ms`` as Server-Timing has them)."""
    for stage, ms in timings_ms.items():
        seconds = ms / 1000.0
        if stage == "search":
            SEARCH_DURATION.labels(mode=mode).observe(seconds)
        SEARCH_STAGE.labels(stage=stage).observe(seconds)
