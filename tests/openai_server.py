"""A real HTTP server on 127.0.0.1 that speaks the OpenAI wire protocol, with scripted faults.

It answers ``POST /v1/chat/completions``, ``POST /v1/embeddings`` and
``POST /v1/rerank`` (the ``/v1`` prefix is optional; rerank in the
Cohere/Jina/Voyage shape, or TEI's bare list with ``rerank_bare``) and records every request, so a test can count
calls per model and read what was sent. Each model has a queue of scripted
replies, used one per call, and then a default (normally a success)::

    from tests.openai_server import http_error, dropped  # the fixture `openai_server` is in tests/conftest.py

    def test_something(openai_server):
        openai_server.script("model-a", http_error(503), http_error(429, retry_after=0))
        openai_server.fail_always("model-b", dropped())
        client = LLMClient(LLMConfig(base_url=openai_server.base_url, model="model-a"))
        ...
        assert openai_server.count(model="model-a") == 3

Chat answers ``chat_reply(model, body)`` (default: "<model>: <last message>",
or a function set with ``on_chat``); embeddings are ``fake_embedding``:
tokens hashed into the requested ``dimensions``, L2-normalised, so equal
texts give equal vectors and shared words give a positive cosine. A rerank
scores each document by the share of the query's words it holds
(``fake_relevance``, or a function set with ``on_rerank``), best first, cut to ``top_n``.
"""

import base64
import hashlib
import json
import math
import re
import struct
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_DIMENSIONS = 64


@dataclass(frozen=True)
class Reply:
    """What the server does for one call. ``kind``: "ok", "status", "slow", "malformed" or "drop"."""

    kind: str = "ok"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    message: str = ""
    text: str | None = None  # "ok": this chat text instead of the default
    delay: float = 0.0  # "slow": seconds before answering (a timeout when above the client's)
    pace: float = 0.0  # a streamed answer: seconds between two deltas


def ok(text: str | None = None) -> Reply:
    return Reply(text=text)


def http_error(status: int, *, retry_after: float | str | None = None, message: str = "") -> Reply:
    headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
    return Reply(kind="status", status=status, headers=headers, message=message or f"scripted {status}")


def slow(seconds: float) -> Reply:
    return Reply(kind="slow", delay=seconds)


def paced(seconds: float, text: str | None = None) -> Reply:
    """A streamed answer that waits ``seconds`` before each delta (a model that writes slowly)."""
    return Reply(text=text, pace=seconds)


def malformed() -> Reply:
    """A 200 whose body is not JSON."""
    return Reply(kind="malformed")


def dropped() -> Reply:
    """The connection is closed after the request is read, with no answer."""
    return Reply(kind="drop")


@dataclass(frozen=True)
class Call:
    path: str  # "chat/completions" or "embeddings"
    model: str
    body: dict[str, Any]
    headers: dict[str, str]
    at: float


def fake_embedding(text: str, dimensions: int = DEFAULT_DIMENSIONS) -> list[float]:
    """Each lower-cased word adds +-1 at a position chosen by its hash; the sum is L2-normalised."""
    vector = [0.0] * dimensions
    for token in re.findall(r"\w+", text.lower()):
        digest = hashlib.sha256(token.encode()).digest()
        position = int.from_bytes(digest[:4], "big") % dimensions
        vector[position] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0:
        vector[0], norm = 1.0, 1.0  # a text without words still gets a unit vector
    return [x / norm for x in vector]


def fake_relevance(query: str, document: str) -> float:
    """The share of the query's words (lower-cased) that the document holds: 0..1."""
    words = set(re.findall(r"\w+", query.lower()))
    return len(words & set(re.findall(r"\w+", document.lower()))) / len(words) if words else 0.0


class FakeOpenAI:
    """The server, its script and its record.

    ``start()``/``stop()``, or the ``openai_server`` fixture (tests/conftest.py).
    """

    def __init__(self, *, api_key: str | None = None, models: set[str] | None = None) -> None:
        self.api_key = api_key  # set: requests without "Bearer <api_key>" get 401
        self.models = models  # set: other models get 404
        self.calls: list[Call] = []
        self.stream_piece_chars = 4  # a streamed answer's deltas: this many characters each, so markers split
        self.streams_finished = 0  # streamed answers written to their end
        self.streams_cut = 0  # streamed answers whose client went away before the end
        self._scripts: dict[str, deque[Reply]] = defaultdict(deque)
        self._always: dict[str, Reply] = {}
        self._chat: Callable[[str, dict], str] | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self.rerank_bare = False  # rerank answers TEI's bare [{"index", "score"}] instead of {"results": [...]}
        self.relevance: Callable[[str, str], float] = fake_relevance  # rerank's score of (query, document)

    # --- scripting ----------------------------------------------------------
    def script(self, model: str, *replies: Reply) -> None:
        """Queue ``replies`` for the next calls naming ``model`` (chat or embeddings), one per call."""
        with self._lock:
            self._scripts[model].extend(replies)

    def fail_always(self, model: str, reply: Reply) -> None:
        """Answer every call to ``model`` with ``reply`` once its queue is empty, until ``heal``."""
        with self._lock:
            self._always[model] = reply

    def heal(self, model: str | None = None) -> None:
        """Forget scripts and standing faults (of ``model``, or of all)."""
        with self._lock:
            for table in (self._scripts, self._always):
                if model is None:
                    table.clear()
                else:
                    table.pop(model, None)

    def on_rerank(self, relevance: Callable[[str, str], float]) -> None:
        """Rerank scores each document ``relevance(query, document)``."""
        self.relevance = relevance

    def on_chat(self, reply: Callable[[str, dict], str]) -> None:
        """Chat successes answer ``reply(model, body)``."""
        self._chat = reply

    # --- the record ---------------------------------------------------------
    def count(self, *, model: str | None = None, path: str | None = None) -> int:
        return len(self.requests(model=model, path=path))

    def requests(self, *, model: str | None = None, path: str | None = None) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if (model is None or c.model == model) and (path is None or c.path == path)]

    def models_called(self) -> list[str]:
        """Models in the order of their calls, repeats kept."""
        with self._lock:
            return [c.model for c in self.calls]

    # --- running ------------------------------------------------------------
    @property
    def base_url(self) -> str:
        assert self._server is not None, "start() the server first"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> "FakeOpenAI":
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        server.daemon_threads = True
        self._server = server
        # A short poll: stop() waits for it, once per test.
        threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
        ).start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # frees handlers still sleeping in a "slow" reply
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # --- answering (handler threads) -----------------------------------------
    def _next_reply(self, model: str) -> Reply:
        with self._lock:
            queue = self._scripts.get(model)
            if queue:
                return queue.popleft()
            return self._always.get(model, Reply())

    def _record(self, call: Call) -> None:
        with self._lock:
            self.calls.append(call)

    def chat_reply(self, model: str, body: dict) -> str:
        if self._chat is not None:
            return self._chat(model, body)
        messages = body.get("messages") or [{}]
        return f"{model}: {messages[-1].get('content', '')}"


def _handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, like real providers: a dropped connection is then a real event

        def log_message(self, format, *args):  # noqa: A002 - the base class's name
            pass  # quiet: pytest shows the test's own output

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            path = self.path.split("?", 1)[0].strip("/").removeprefix("v1/")
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                return self._json(400, _error("the body is not JSON", "invalid_request_error"))
            model = str(body.get("model", ""))
            fake._record(Call(path=path, model=model, body=body, headers=dict(self.headers.items()), at=time.time()))
            if path not in ("chat/completions", "embeddings", "rerank"):
                return self._json(404, _error(f"no route {self.path}", "invalid_request_error"))
            if fake.api_key is not None and self.headers.get("Authorization") != f"Bearer {fake.api_key}":
                return self._json(401, _error("Incorrect API key provided", "invalid_api_key"))
            if fake.models is not None and model not in fake.models:
                return self._json(404, _error(f"The model `{model}` does not exist", "model_not_found"))
            reply = fake._next_reply(model)
            if reply.kind == "drop":
                self.close_connection = True
                return None
            if reply.kind == "malformed":
                return self._send(200, b'{"id": "chatcmpl-broken", "choices": [', {"Content-Type": "application/json"})
            if reply.kind == "status":
                return self._json(reply.status, _error(reply.message, "scripted"), reply.headers)
            if reply.kind == "slow" and fake._stopping.wait(reply.delay):
                self.close_connection = True  # the server is stopping: no answer
                return None
            if path == "embeddings":
                return self._json(200, _embeddings(model, body))
            if path == "rerank":
                return self._json(200, _reranked(model, body, bare=fake.rerank_bare, relevance=fake.relevance))
            text = reply.text if reply.text is not None else fake.chat_reply(model, body)
            if body.get("stream"):
                return self._stream(model, text, pace=reply.pace)
            return self._json(200, _completion(model, text))

        def _stream(self, model: str, text: str, *, pace: float):
            """Server-Sent Events as OpenAI streams them: role, content deltas, usage, [DONE]."""
            size = fake.stream_piece_chars
            pieces = [text[i : i + size] for i in range(0, len(text), size)]
            events = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
            events += [{"choices": [{"index": 0, "delta": {"content": piece}}]} for piece in pieces]
            events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            events.append({"choices": [], "usage": _completion(model, text)["usage"]})
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                for event in events:
                    if pace and event["choices"] and event["choices"][0]["delta"].get("content"):
                        if fake._stopping.wait(pace):
                            break
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                with fake._lock:
                    fake.streams_cut += 1
            else:
                with fake._lock:
                    fake.streams_finished += 1
            self.close_connection = True

        def _json(self, status: int, payload: dict | list, headers: dict[str, str] | None = None):
            self._send(status, json.dumps(payload).encode(), {"Content-Type": "application/json", **(headers or {})})

        def _send(self, status: int, data: bytes, headers: dict[str, str]):
            try:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client gave up (its timeout): nothing to answer

    return Handler


def _error(message: str, kind: str) -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


def _completion(model: str, text: str) -> dict:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": len(text.split()), "total_tokens": len(text.split())},
    }


def _embeddings(model: str, body: dict) -> dict:
    texts = body.get("input", [])
    texts = [texts] if isinstance(texts, str) else texts
    dimensions = int(body.get("dimensions") or DEFAULT_DIMENSIONS)
    data = []
    for index, text in enumerate(texts):
        vector = fake_embedding(str(text), dimensions)
        if body.get("encoding_format") == "base64":  # the openai SDK's default: little-endian float32
            encoded: Any = base64.b64encode(struct.pack(f"<{dimensions}f", *vector)).decode()
        else:
            encoded = vector
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    tokens = sum(len(str(t).split()) for t in texts)
    return {"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def _reranked(model: str, body: dict, *, bare: bool, relevance: Callable[[str, str], float]) -> dict | list:
    documents = [str(d.get("text", "")) if isinstance(d, dict) else str(d) for d in body.get("documents", [])]
    scored = sorted(
        ((index, relevance(str(body.get("query", "")), text)) for index, text in enumerate(documents)),
        key=lambda pair: -pair[1],
    )[: int(body.get("top_n") or len(documents))]
    if bare:
        return [{"index": index, "score": score} for index, score in scored]
    return {"model": model, "results": [{"index": index, "relevance_score": score} for index, score in scored]}
