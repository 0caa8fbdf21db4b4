"""RAG_EMBEDDING_BACKEND=auto: the backend that is faster on this machine, for bulk embedding and for one query.

Which backend is faster depends on the CPU: ONNX Runtime embedded a query
2.5x faster than PyTorch on the 2-core development machine and bulk at
0.92x, but bulk at 0.39-0.68x on a 16-core one (issue 44). So a model
named ``model#auto`` times both on first use in a process, unless this
machine's answer is already in ``RAG_VAR_DIR/models/backend-choice.json``
(keyed by the CPU, its core count, the process's threads, the torch and
onnxruntime versions, the device and the model), and then embeds bulk
texts with the faster for bulk and queries with the faster for one query,
when their vectors agree (cosine >= 0.999 on every sample); when they do
not, one backend (the faster for bulk) does both. On a GPU nothing is
timed: PyTorch does both (ONNX Runtime here is CPU-only).
"""

import hashlib
import json
import logging
import os
import platform
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

from sources.embedding.backends import ONNX, SEPARATOR, TORCH, local_name_parse
from sources.embedding.base import EmbeddingError, ModelSpec
from sources.embedding.device import device_resolve, on_gpu, vectors_agree
from sources.embedding.local import LocalEmbedder
from sources.embedding.onnx_export import onnx_cache_root

log = logging.getLogger(__name__)

MEASURED = (TORCH, ONNX)  # int8 is not timed: its vectors are another model's (0.99 cosine), never an equal choice
CHOICE_FILE = "backend-choice.json"
PURPOSES = ("bulk", "query")
QUERY = "how do I register a model admin"
QUERY_REPEATS = 20
# Bulk: batches of this many sample texts until the budget is spent (at least one batch), so a slow CPU
# (2 cores: ~1 s per 32 chunks of 800 characters) measures for seconds, not the 128 texts' ten.
BULK_TEXTS = 128
BULK_BATCH = 32
BULK_BUDGET_SECONDS = 1.5
SAMPLE_CHARS = 800  # about 200 word pieces of code, the chunker's mean on Django (203)


@dataclass(frozen=True, slots=True)
class BackendChoice:
    """What runs bulk embedding and queries, and the measurement behind it (texts/s, milliseconds)."""

    bulk: str
    query: str
    agree: bool
    bulk_per_second: dict[str, float] = field(default_factory=dict)
    query_ms: dict[str, float] = field(default_factory=dict)
    reason: str = ""

    def summary(self) -> str:
        if self.reason:
            return f"{self.bulk} for both: {self.reason}"
        # In MEASURED's order, whatever order the cache file (written with sorted keys) gave back.
        rates = ", ".join(f"{b} {self.bulk_per_second[b]:.1f}/s" for b in sorted(self.bulk_per_second, key=_rank))
        queries = ", ".join(f"{b} {self.query_ms[b]:.1f} ms" for b in sorted(self.query_ms, key=_rank))
        agreement = "vectors agree" if self.agree else "vectors differ: one backend for both"
        return f"bulk {self.bulk} ({rates}); query {self.query} ({queries}); {agreement}"


def backend_choose(*, bulk_per_second: dict[str, float], query_ms: dict[str, float], agree: bool) -> tuple[str, str]:
    """(bulk backend, query backend): the most texts per second for bulk, the fewest milliseconds for one query;
    when the backends' vectors do not agree, the bulk one for both (one model's vectors, one backend's)."""
    bulk = max(bulk_per_second, key=lambda b: bulk_per_second[b])  # a tie: the first measured
    if not agree:
        return bulk, bulk
    return bulk, min(query_ms, key=lambda b: query_ms[b])


def machine_identity(*, model: str, device: str) -> dict[str, str]:
    """What a measurement holds for: another CPU, core count, thread count, library or device measures again."""
    threads = int(os.environ.get("RAG_TORCH_THREADS") or 0)
    return {
        "cpu": _cpu_name(),
        "cpu_count": str(os.cpu_count()),
        "threads": str(threads) if threads > 0 else "default",
        "torch": _version("torch"),
        "onnxruntime": _version("onnxruntime"),
        "device": device,
        "model": model,
    }


def machine_key(identity: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]


def choice_file() -> Path:
    return onnx_cache_root().parent / CHOICE_FILE


def choices_read() -> dict[str, dict]:
    """Every cached measurement, by machine key: {"machine": ..., "choice": ..., "measured_at": ...}."""
    try:
        cached = json.loads(choice_file().read_text())
    except FileNotFoundError:
        return {}
    except ValueError:
        return {}  # a damaged cache measures again and is rewritten whole
    return cached if isinstance(cached, dict) else {}


def choice_cached(identity: dict[str, str]) -> BackendChoice | None:
    entry = choices_read().get(machine_key(identity))
    try:
        return BackendChoice(**entry["choice"]) if entry else None
    except (TypeError, KeyError):
        return None


def choice_save(identity: dict[str, str], choice: BackendChoice) -> None:
    """Add this machine's choice to the cache file, written to a temporary file and renamed into place: a process
    reading it meanwhile sees the old file or the new one, never half of one."""
    path = choice_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    cached = choices_read()
    cached[machine_key(identity)] = {
        "machine": identity,
        "choice": asdict(choice),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".backend-choice-", suffix=".json")
    try:
        with os.fdopen(descriptor, "w") as out:
            json.dump(cached, out, indent=1, sort_keys=True)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def choices_listed() -> list[dict[str, str]]:
    """The cached choices as the overview shows them: the machine, the model, the choice and its timings, when."""
    listed = []
    for entry in choices_read().values():
        try:
            machine, choice = entry["machine"], BackendChoice(**entry["choice"])
            listed.append(
                {
                    "machine": f"{machine['cpu']}, {machine['cpu_count']} cores, threads {machine['threads']}, "
                    f"{machine['device']}; torch {machine['torch']}, onnxruntime {machine['onnxruntime']}",
                    "model": machine["model"],
                    "choice": choice.summary(),
                    "measured_at": entry.get("measured_at", ""),
                }
            )
        except (KeyError, TypeError):
            continue  # an entry of another version's shape: measured again when its machine next asks
    return sorted(listed, key=lambda row: row["measured_at"], reverse=True)


def sample_texts(count: int = BULK_TEXTS) -> list[str]:
    """Realistic chunks, the same on every machine: this package's own source cut into 800-character pieces."""
    texts: list[str] = []
    for path in sorted(Path(__file__).parent.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        texts.extend(text[start : start + SAMPLE_CHARS] for start in range(0, len(text), SAMPLE_CHARS))
    texts = [text for text in texts if text.strip()]
    return (texts * (count // max(len(texts), 1) + 1))[:count]


def backend_measure(embedders: dict[str, LocalEmbedder]) -> BackendChoice:
    """Time each backend's bulk rate and one query's latency as this process runs them, and check their vectors."""
    texts = sample_texts()
    bulk_per_second: dict[str, float] = {}
    query_ms: dict[str, float] = {}
    vectors: dict[str, np.ndarray] = {}
    for backend, embedder in embedders.items():
        embedder.embed([QUERY])  # loads the model and warms its first call, not timed
        done: list[np.ndarray] = []
        started = time.perf_counter()
        while len(done) * BULK_BATCH < len(texts) and (not done or time.perf_counter() - started < BULK_BUDGET_SECONDS):
            batch = texts[len(done) * BULK_BATCH : (len(done) + 1) * BULK_BATCH]
            done.append(embedder.embed(batch, batch_size=BULK_BATCH))
        bulk_per_second[backend] = sum(len(v) for v in done) / (time.perf_counter() - started)
        timings = []
        for _ in range(QUERY_REPEATS):
            started = time.perf_counter()
            query_vector = embedder.embed([QUERY])
            timings.append(time.perf_counter() - started)
        query_ms[backend] = statistics.median(timings) * 1000
        vectors[backend] = np.concatenate([*done, query_vector])
    common = min(len(v) - 1 for v in vectors.values())  # texts every backend embedded, then the query
    first, *others = (np.concatenate([v[:common], v[-1:]]) for v in vectors.values())
    agree = all(vectors_agree(first, other) for other in others)
    bulk, query = backend_choose(bulk_per_second=bulk_per_second, query_ms=query_ms, agree=agree)
    return BackendChoice(bulk=bulk, query=query, agree=agree, bulk_per_second=bulk_per_second, query_ms=query_ms)


class AutoEmbedder:
    """A local model named ``model#auto``: embeds with the backend measured faster for the purpose asked."""

    def __init__(self, name: str, *, device: str = "cpu") -> None:
        self.name = name
        self.device = device
        self.base, _ = local_name_parse(name)
        self._embedders = {
            TORCH: LocalEmbedder(self.base, device=device),
            ONNX: LocalEmbedder(f"{self.base}{SEPARATOR}{ONNX}", device=device),
        }
        self._choice: BackendChoice | None = None
        self._lock = threading.Lock()

    @property
    def choice(self) -> BackendChoice:
        """This process's choice: cached for this machine, else measured now (a few seconds) and cached."""
        if self._choice is None:
            with self._lock:
                if self._choice is None:
                    self._choice = self._choose()
                    used = {self._choice.bulk, self._choice.query}
                    self._embedders = {b: e for b, e in self._embedders.items() if b in used}  # the other's memory goes
        return self._choice

    def _choose(self) -> BackendChoice:
        device = device_resolve(self.device)
        if on_gpu(device):
            return BackendChoice(bulk=TORCH, query=TORCH, agree=True, reason=f"{device}: PyTorch runs ONNX's vectors")
        identity = machine_identity(model=self.base, device=device)
        choice = choice_cached(identity)
        if choice is None or {choice.bulk, choice.query} - set(MEASURED):
            choice = backend_measure(self._embedders)
            choice_save(identity, choice)
        log.info("embedding model %r: %s", self.name, choice.summary())
        return choice

    @property
    def loaded(self) -> bool:
        return self._choice is not None and all(e.loaded for e in self._embedders.values())

    @property
    def runs_on(self) -> str:
        if self._choice is None:
            return ""
        bulk, query = self._embedders[self._choice.bulk], self._embedders[self._choice.query]
        return f"bulk: {bulk.runs_on}, query: {query.runs_on}"

    @property
    def spec(self) -> ModelSpec:
        dimensions = self._embedders[self.choice.bulk].spec.dimensions
        return ModelSpec(provider="local", name=self.name, dimensions=dimensions, normalized=True)

    def embed(
        self,
        texts: list[str],
        *,
        batch_size: int = 64,
        pieces: bool = False,
        on_batch: Callable[[], None] | None = None,
        purpose: str = "bulk",
    ) -> np.ndarray:
        if purpose not in PURPOSES:
            raise EmbeddingError(f"unknown embedding purpose {purpose!r}; valid: {', '.join(PURPOSES)}")
        backend = self.choice.bulk if purpose == "bulk" else self.choice.query
        return self._embedders[backend].embed(texts, batch_size=batch_size, pieces=pieces, on_batch=on_batch)


def _rank(backend: str) -> int:
    return MEASURED.index(backend) if backend in MEASURED else len(MEASURED)


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "absent"
