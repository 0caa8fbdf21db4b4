"""`rag_bench answers`: do streamed answers from a slow model hold up searches? On the real web server.

Steps: the search bench's corpus (measure/bench_corpus.py); a slow fake chat
model on loopback (silent for ``first_token`` seconds, then a delta every
``pace`` seconds), written here so the bench needs no provider; gunicorn as
`make run` starts it with a chat model configured; warm-up; closed-loop
searchers for S seconds alone, then again beside N clients that each keep
one streamed answer open (reading it to its end, then asking again).
Numbers: the searchers' p50/p95 in both phases, the answers completed and
their time to the first byte and to the first delta.
"""

import http.client
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from django.conf import settings
from django.db import connection

from access.keys import api_key_create
from kernel.errors import ApplicationError
from measure.bench_corpus import BENCH_BOT, bench_corpus_ensure
from measure.bench_load import (
    REQUEST_TIMEOUT,
    clients_run,
    database_url_for,
    percentile_ms,
    samples_summary,
    web_server,
)
from measure.bench_queries import query_stream
from retrieval.search import Mode

WARMUP_SECONDS = 3.0
STREAMS_HEAD_START = 2.0  # seconds the answers run before the searchers start: every stream is open by then
MODEL = "bench-slow-writer"
ANSWER = "The bench corpus says so [1]. " * 8


@dataclass(frozen=True, slots=True)
class AnswersBenchOptions:
    chunks: int = 2000
    streams: int = 8
    searchers: int = 1
    seconds: float = 10.0
    first_token: float = 3.0  # the model's silence before it writes (keep-alives flow meanwhile)
    pace: float = 0.25  # seconds between its deltas
    seed: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.streams <= 64:
            raise ApplicationError(f"--streams must be 1 to 64, got {self.streams}")
        if not 1 <= self.searchers <= 64:
            raise ApplicationError(f"--searchers must be 1 to 64, got {self.searchers}")
        if self.seconds <= 0:
            raise ApplicationError(f"--seconds must be positive, got {self.seconds}")


class SlowModel:
    """An OpenAI-compatible chat endpoint that streams ``ANSWER`` slowly; counts streams open and cut."""

    def __init__(self, *, first_token: float, pace: float) -> None:
        self.first_token, self.pace = first_token, pace
        self.open = self.finished = self.cut = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> "SlowModel":
        threading.Thread(target=self._server.serve_forever, daemon=True, name="slow-model").start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _count(self, **changes: int) -> None:
        with self._lock:
            for name, delta in changes.items():
                setattr(self, name, getattr(self, name) + delta)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format, *args):  # noqa: A002 - the base class's name
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                model._count(open=1)
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    time.sleep(model.first_token)
                    for start in range(0, len(ANSWER), 8):
                        delta = {"choices": [{"index": 0, "delta": {"content": ANSWER[start : start + 8]}}]}
                        self.wfile.write(f"data: {json.dumps(delta)}\n\n".encode())
                        self.wfile.flush()
                        time.sleep(model.pace)
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                    model._count(finished=1)
                except OSError:
                    model._count(cut=1)
                finally:
                    model._count(open=-1)
                self.close_connection = True

        return Handler


def answers_bench(options: AnswersBenchOptions, *, log: Callable[[str], None] = print) -> dict:
    corpus = bench_corpus_ensure(chunks=options.chunks, seed=options.seed, log=log)
    log(f"corpus {corpus.source.key}: {'built' if corpus.built else 'reused'}")
    key_row, raw = api_key_create(name="rag_bench answers", bot_id=BENCH_BOT, rate_limit_per_minute=0)
    report: dict = {
        "streams": options.streams,
        "searchers": options.searchers,
        "seconds": options.seconds,
        "model": {"first_token_s": options.first_token, "pace_s": options.pace},
    }
    try:
        with SlowModel(first_token=options.first_token, pace=options.pace) as model:
            database_url = database_url_for(os.environ["DATABASE_URL"], connection.settings_dict["NAME"])
            env = {"RAG_LLM_BASE_URL": model.url, "RAG_LLM_MODEL": MODEL, "RAG_ANSWER_TIMEOUT": "60"}
            log_path = settings.VAR_DIR / "log" / "bench-web.log"
            with web_server(database_url=database_url, log_path=log_path, env=env, answers=True) as url:
                report["server"] = {"workers": settings.RAG_WEB_WORKERS, "url": url}
                report |= _measure(url, raw, model, options, log)
    finally:
        key_row.delete()
    return report


def _measure(url: str, key: str, model: SlowModel, options: AnswersBenchOptions, log: Callable[[str], None]) -> dict:
    log(f"warming up {url} for {WARMUP_SECONDS:.0f} s ...")
    clients_run(url=url, key=key, streams=_searches(options, 4, offset=10_000), seconds=WARMUP_SECONDS)
    samples, elapsed = clients_run(
        url=url, key=key, streams=_searches(options, options.searchers), seconds=options.seconds
    )
    alone = samples_summary(samples, elapsed)
    log(f"  searches alone: p50 {alone['p50_ms']} ms, p95 {alone['p95_ms']} ms, {alone['qps']} q/s")

    stop = threading.Event()
    answers: list[dict] = []
    lock = threading.Lock()

    def answering(number: int) -> None:
        while not stop.is_set():
            outcome = _answer(url, key, f"bench corpus question {number}")
            with lock:
                answers.append(outcome)

    threads = [threading.Thread(target=answering, args=(n,), daemon=True) for n in range(options.streams)]
    for thread in threads:
        thread.start()
    time.sleep(STREAMS_HEAD_START)
    open_when_searching = model.open
    samples, elapsed = clients_run(
        url=url, key=key, streams=_searches(options, options.searchers), seconds=options.seconds
    )
    beside = samples_summary(samples, elapsed)
    open_after = model.open
    stop.set()
    for thread in threads:
        thread.join(REQUEST_TIMEOUT)
    log(
        f"  searches beside {options.streams} streamed answers ({open_when_searching} model streams open as they "
        f"started, {open_after} at their end): p50 {beside['p50_ms']} ms, p95 {beside['p95_ms']} ms, "
        f"{beside['qps']} q/s, {beside['errors']} errors"
    )
    done = [a for a in answers if a["status"] == 200 and a["done"]]
    statuses: dict[str, int] = {}
    for a in answers:
        statuses[str(a["status"])] = statuses.get(str(a["status"]), 0) + 1
    summary = {
        "answers": len(answers),
        "completed": len(done),
        "statuses": statuses,
        "first_byte_p50_ms": percentile_ms([a["first_byte"] for a in done], 50),
        "first_delta_p50_ms": percentile_ms([a["first_delta"] for a in done if a["first_delta"] is not None], 50),
        "keepalives": sum(a["keepalives"] for a in done),
        "model_streams_open_when_searching": open_when_searching,
    }
    log(f"  answers: {summary}")
    return {"alone": alone, "beside_answers": beside, "answers": summary}


def _searches(options: AnswersBenchOptions, count: int, *, offset: int = 0):
    return [
        ((kind, query, Mode.HYBRID.value) for kind, query in query_stream(seed=options.seed * 1000 + offset + i))
        for i in range(count)
    ]


def _answer(url: str, key: str, question: str) -> dict:
    """One streamed answer read to its end: status, seconds to the first byte and the first delta, keep-alives."""
    parts = urlsplit(url)
    body = json.dumps({"query": question, "stream": True, "budget_tokens": 1000})
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    started = time.perf_counter()
    outcome: dict = {"status": 0, "done": False, "first_byte": None, "first_delta": None, "keepalives": 0}
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=REQUEST_TIMEOUT)
    try:
        connection.request("POST", "/api/v1/answer", body=body, headers=headers)
        response = connection.getresponse()
        outcome["status"] = response.status
        if response.status != 200:
            response.read()
            time.sleep(0.5)  # refused (the answers' limit): ask again a little later, as a page would
            return outcome
        while line := response.readline():
            now = time.perf_counter() - started
            if outcome["first_byte"] is None:
                outcome["first_byte"] = now
            if line.startswith(b": keep-alive"):
                outcome["keepalives"] += 1
            elif line.startswith(b"event: delta") and outcome["first_delta"] is None:
                outcome["first_delta"] = now
            elif line.startswith(b"event: done"):
                outcome["done"] = True
    except (OSError, http.client.HTTPException):
        pass
    finally:
        connection.close()
    return outcome
