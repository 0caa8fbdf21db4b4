"""The search bench's load: the real web server as a child process, closed-loop
HTTP clients (threads, one keep-alive connection each, the standard library's
http.client), and the percentiles of what they measured."""

import contextlib
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import numpy as np

from measure.bench_queries import QueryKind
from rag_site.supervisor import process_stop
from retrieval.search import STAGES

REQUEST_TIMEOUT = 60.0  # seconds; far above the statement timeout, so a slow answer is measured, not dropped
START_TIMEOUT = 120.0


@dataclass(frozen=True, slots=True)
class Sample:
    kind: QueryKind
    mode: str
    seconds: float  # as the client saw it
    status: int  # 0: no HTTP answer (connection error, timeout)
    warnings: int = 0
    timings: dict[str, float] = field(default_factory=dict)  # the Server-Timing header, ms
    error: str = ""


# One client's requests: (kind, query, mode), drawn until the run ends.
Stream = Iterator[tuple[QueryKind, str, str]]


def server_timing_parse(header: str) -> dict[str, float]:
    """``embed;dur=4.1, lexical;dur=2.3`` -> {"embed": 4.1, "lexical": 2.3}; anything else is ignored."""
    timings = {}
    for part in header.split(","):
        name, _, rest = part.strip().partition(";")
        for param in rest.split(";"):
            key, _, value = param.strip().partition("=")
            if key == "dur" and name:
                with contextlib.suppress(ValueError):
                    timings[name] = float(value)
    return timings


class Client:
    """One keep-alive connection to the search API; reconnects after a failure."""

    def __init__(self, url: str, key: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.base = parts.path.rstrip("/")
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", "Host": f"{self.host}"}
        self.connection: http.client.HTTPConnection | None = None

    def search(self, kind: QueryKind, query: str, mode: str) -> Sample:
        body = json.dumps({"query": query, "mode": mode, "k": 10})
        started = time.perf_counter()
        try:
            if self.connection is None:
                self.connection = http.client.HTTPConnection(self.host, self.port, timeout=REQUEST_TIMEOUT)
            self.connection.request("POST", f"{self.base}/api/v1/search", body=body, headers=self.headers)
            response = self.connection.getresponse()
            payload = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            return Sample(kind, mode, time.perf_counter() - started, 0, error=f"{type(exc).__name__}: {exc}")
        seconds = time.perf_counter() - started
        if response.status != 200:
            return Sample(kind, mode, seconds, response.status, error=payload[:300].decode("utf-8", "replace"))
        warnings = len(json.loads(payload).get("warnings") or [])
        return Sample(kind, mode, seconds, 200, warnings, server_timing_parse(response.getheader("Server-Timing", "")))

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def clients_run(
    *, url: str, key: str, streams: Sequence[Stream], seconds: float | None = None, stop: threading.Event | None = None
) -> tuple[list[Sample], float]:
    """Each stream on its own thread and connection, one request at a time (closed loop),
    until ``seconds`` have passed or ``stop`` is set; returns the samples and the wall time."""
    stop = stop or threading.Event()
    samples: list[Sample] = []
    lock = threading.Lock()

    def client(stream: Stream) -> None:
        connection = Client(url, key)
        try:
            for kind, query, mode in stream:
                if stop.is_set():
                    return
                sample = connection.search(kind, query, mode)
                with lock:
                    samples.append(sample)
        finally:
            connection.close()

    threads = [threading.Thread(target=client, args=(stream,), daemon=True) for stream in streams]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    if seconds is not None:
        stop.wait(seconds)
        stop.set()
    for thread in threads:
        thread.join()
    return samples, time.perf_counter() - started


def percentile_ms(seconds: list[float], q: float) -> float:
    """The ``q``-th percentile (linear interpolation) in milliseconds; 0 when there are none."""
    return round(float(np.percentile(np.array(seconds) * 1000.0, q)), 2) if seconds else 0.0


def samples_summary(samples: list[Sample], elapsed: float) -> dict:
    """Latency percentiles over every answer (errors included: a client waited for them too),
    QPS of successful answers, errors (anything but 200), and where the time went (means, ms)."""
    answered = [s for s in samples if s.status == 200]
    latencies = [s.seconds for s in samples]
    summary = {
        "requests": len(samples),
        "p50_ms": percentile_ms(latencies, 50),
        "p95_ms": percentile_ms(latencies, 95),
        "p99_ms": percentile_ms(latencies, 99),
        "max_ms": round(max(latencies) * 1000.0, 2) if latencies else 0.0,
        "qps": round(len(answered) / elapsed, 2) if elapsed else 0.0,
        "errors": len(samples) - len(answered),
        "warnings": sum(1 for s in answered if s.warnings),
        "stages_ms": stages_summary(answered),
        "by_kind": {
            kind.value: {
                "requests": len(group),
                "p50_ms": percentile_ms([s.seconds for s in group], 50),
                "p95_ms": percentile_ms([s.seconds for s in group], 95),
            }
            for kind in QueryKind
            if (group := [s for s in samples if s.kind == kind])
        },
    }
    if summary["errors"]:
        summary["error_examples"] = sorted({f"{s.status} {s.error}"[:200] for s in samples if s.status != 200})[:5]
    return summary


def stages_summary(answered: list[Sample]) -> dict[str, float]:
    """Mean milliseconds per stage. lexical + vector + embed_wait + search_other = search;
    search + outside = what the client saw (outside: HTTP, queueing, auth, serialising).
    embed runs beside lexical, so it is not part of the sum."""
    if not answered:
        return {}
    mean = {stage: sum(s.timings.get(stage, 0.0) for s in answered) / len(answered) for stage in STAGES}
    client = sum(s.seconds for s in answered) * 1000.0 / len(answered)
    parts = {
        "embed": mean["embed"],
        "embed_wait": mean["embed_wait"],
        "lexical": mean["lexical"],
        "vector": mean["vector"],
        "search_other": mean["search"] - mean["lexical"] - mean["vector"] - mean["embed_wait"],
        "outside": client - mean["search"],
        "client": client,
    }
    return {name: round(value, 2) for name, value in parts.items()}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url_for(url: str, name: str) -> str:
    """``url`` with its database replaced by ``name`` (tests run on test_<name>)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + quote(name)))


@contextlib.contextmanager
def web_server(
    *, database_url: str, log_path: Path, env: dict[str, str] | None = None, answers: bool | None = None
) -> Iterator[str]:
    """gunicorn as `make run` starts it (rag_run.web_command) on a free port, on ``database_url``; yields its URL.

    ``env``: more variables for it (a chat model, say); ``answers``: start it as with a chat model configured."""
    from rag_site.management.commands.rag_run import web_command

    port = free_port()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **(env or {}), "DATABASE_URL": database_url}
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            web_command(
                python=sys.executable, bind=f"127.0.0.1:{port}", **({} if answers is None else {"answers": answers})
            ),
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=Path(__file__).resolve().parent.parent,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the web server did not start; its log: {log_path}")
            with contextlib.suppress(OSError, http.client.HTTPException):
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                connection.request("GET", "/api/openapi.json")
                if connection.getresponse().status == 200:
                    break
            time.sleep(0.2)
        yield url
    finally:
        process_stop(process)
