"""An instant stand-in encoder: an OpenAI-compatible ``/embeddings`` server on loopback that answers at once.

Each text gets a pseudo-random unit vector seeded from its hash (equal texts,
equal vectors; nothing about meaning), of the bundled model's 384
dimensions, so the HNSW index does the same work per vector. Used as the
``api:`` model ``api:instant@384`` it goes through the real pipeline (the
API embedder, words first, then the vectors stage) and real vectors are
written: ``rag_bench index --encoder instant`` measures everything around
the encoder, which is what sets the pace once a GPU encodes thousands of
chunks a second. A server rather than an in-process stand-in, so worker
processes reach it too. Django-free; the tests' ``instant_encoder`` fixture
starts one.
"""

import hashlib
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

MODEL = "instant"
DIMENSIONS = 384  # the bundled model's (all-MiniLM-L6-v2)


def instant_vector(text: str, dimensions: int = DIMENSIONS) -> np.ndarray:
    """The unit vector the server answers for ``text``: the same for the same text, in any process."""
    seed = int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")
    vector = np.random.default_rng(seed).standard_normal(dimensions, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def _answer(body: dict) -> bytes:
    texts = body["input"]
    texts = [texts] if isinstance(texts, str) else texts
    dimensions = int(body.get("dimensions") or DIMENSIONS)
    # Six decimals are plenty for a unit vector (the client normalises again) and keep the JSON short.
    data = [
        {
            "object": "embedding",
            "index": index,
            "embedding": np.round(instant_vector(text, dimensions).astype(np.float64), 6).tolist(),
        }
        for index, text in enumerate(texts)
    ]
    return json.dumps({"object": "list", "model": body.get("model", MODEL), "data": data}).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the client reuses its connection

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length))
            if not self.path.rstrip("/").endswith("/embeddings"):
                raise ValueError(f"only /embeddings is served, not {self.path}")
            reply, status = _answer(body), 200
        except (ValueError, KeyError, TypeError) as exc:
            reply, status = json.dumps({"error": {"message": str(exc)}}).encode(), 400
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: object) -> None:
        pass  # a request per batch: nothing worth a line


class InstantEncoder:
    """The server, on a free loopback port, for a ``with`` block: ``base_url`` for RAG_LLM_BASE_URL and
    ``model_name`` for RAG_EMBEDDING_MODEL. ``process``: served by a child process, so its CPU (JSON, about 0.25 ms
    a text) is not the measured process's and takes no turn at its interpreter lock (the bench); else by a thread."""

    model_name = f"api:{MODEL}@{DIMENSIONS}"

    def __init__(self, *, process: bool = False) -> None:
        self.process = process
        self._child: subprocess.Popen[str] | None = None
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> "InstantEncoder":
        if self.process:
            self._child = subprocess.Popen(
                [sys.executable, "-m", "measure.instant_encoder"],
                stdout=subprocess.PIPE,
                text=True,
                cwd=Path(__file__).resolve().parent.parent,  # where ``measure`` is importable
            )
            assert self._child.stdout is not None
            self.port = int(self._child.stdout.readline())  # it prints its port once it listens
            return self
        server = self._server = _server()
        self.port = server.server_address[1]
        self._thread = threading.Thread(target=server.serve_forever, name="instant-encoder", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._child is not None:
            self._child.terminate()
            self._child.wait()
        if self._server is not None and self._thread is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join()


def _server() -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    return server


if __name__ == "__main__":
    served = _server()
    print(served.server_address[1], flush=True)
    served.serve_forever()
