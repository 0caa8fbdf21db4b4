"""Speed measurements behind `manage.py rag_bench` (pure functions, no timing in tests)."""

import os
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kernel.errors import ApplicationError
from measure.bench_load import percentile_ms
from sources.chunking import chunk_text, language_for

if TYPE_CHECKING:
    from sources.pipeline.run import Helpers

# Files the bench reads: text under this size (the indexer's default limit is
# 500 kB; a little more shows the cost of big files without drowning in them).
MAX_FILE_BYTES = 2_000_000
# One short query, as a user types it: what search embeds before it can read.
QUERY = "how do I add a custom action to the admin change list"
QUERY_REPEATS = 200
_SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", "venv", "dist", "build"}


@dataclass
class ChunkBench:
    files: int = 0
    bytes: int = 0
    chunks: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    skipped: int = 0
    by_language: Counter = field(default_factory=Counter)
    files_by_language: Counter = field(default_factory=Counter)

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.cpu_seconds if self.cpu_seconds else 0.0

    @property
    def files_per_s(self) -> float:
        return self.files / self.cpu_seconds if self.cpu_seconds else 0.0

    def as_dict(self) -> dict:
        return {
            "files": self.files,
            "bytes": self.bytes,
            "chunks": self.chunks,
            "skipped": self.skipped,
            "seconds": round(self.seconds, 3),
            "cpu_seconds": round(self.cpu_seconds, 3),
            "mb_per_s": round(self.mb_per_s, 2),
            "files_per_s": round(self.files_per_s, 1),
            "chunks_by_language": dict(self.by_language.most_common()),
            "files_by_language": dict(self.files_by_language.most_common()),
        }


def text_files(root: Path) -> list[tuple[Path, str]]:
    """Readable UTF-8 text files under ``root`` (read before timing starts)."""
    found = []
    for path in sorted(root.rglob("*")):
        if any(part in _SKIP_DIRS for part in path.relative_to(root).parts) or not path.is_file():
            continue
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                continue
            raw = path.read_bytes()
        except OSError:
            continue
        if b"\x00" in raw[:8192]:
            continue
        try:
            found.append((path, raw.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    return found


def chunk_bench(root: Path, *, max_chars: int = 1500, overlap: int = 200) -> ChunkBench:
    """Chunk every text file under ``root`` once; CPU time is one core's."""
    files = text_files(root)
    result = ChunkBench()
    wall, cpu = time.perf_counter(), time.process_time()
    for path, text in files:
        chunks = chunk_text(text, str(path), max_chars=max_chars, overlap=overlap)
        language = language_for(str(path))
        result.files += 1
        result.bytes += len(text.encode("utf-8", "surrogatepass"))
        result.chunks += len(chunks)
        result.by_language[language] += len(chunks)
        result.files_by_language[language] += 1
    result.seconds = time.perf_counter() - wall
    result.cpu_seconds = time.process_time() - cpu
    return result


ENCODERS = ("model", "instant")


@dataclass(frozen=True)
class Hardware:
    """What the index bench embeds with: ``processes`` bulk worker processes of ``threads`` threads each (the
    bench's own and ``processes - 1`` Celery workers it starts, as RAG_WORKER_CONCURRENCY and RAG_TORCH_THREADS
    would) on ``device`` (RAG_EMBEDDING_DEVICE); ``encoder``: "model", the one RAG_EMBEDDING_MODEL names, or
    "instant", a stand-in that answers at once (measure/instant_encoder.py), so only what is around the encoder
    is measured."""

    processes: int = 1
    threads: int = 0
    device: str = ""
    raw: bool = True  # also time the model's raw encode of every chunk (a second pass over them)
    encoder: str = "model"


def index_bench(root: Path, hardware: Hardware | None = None) -> dict:
    """Raw ``encode`` throughput against end-to-end indexing of the same tree.

    Registers ``root`` as a temporary workspace root (removed afterwards),
    so the real walker, chunker, embedder and bulk writes are measured.
    With ``hardware.processes`` > 1 the job's vector batches are shared with
    worker processes started for the run (their models loaded before timing).
    """
    hardware = hardware or Hardware()
    if hardware.encoder not in ENCODERS:
        raise ValueError(f"unknown encoder {hardware.encoder!r}; valid encoders: {', '.join(ENCODERS)}")
    with _hardware_applied(hardware):
        if hardware.encoder == "model":
            report = _index_bench(root, hardware)
        else:
            from django.test import override_settings

            from measure.instant_encoder import InstantEncoder

            with (
                InstantEncoder(process=True) as server,
                override_settings(RAG_EMBEDDING_MODEL=server.model_name, RAG_LLM_BASE_URL=server.base_url),
            ):
                report = _index_bench(root, hardware)
    return {
        **report,
        "encoder": hardware.encoder,
        "processes": hardware.processes,
        "threads": hardware.threads,
        "device": hardware.device,
    }


@contextmanager
def _hardware_applied(hardware: Hardware) -> Iterator[None]:
    """This process embeds with ``hardware``'s threads and device while the bench runs (before any model loads)."""
    from django.conf import settings

    saved = {name: os.environ.get(name) for name in ("RAG_TORCH_THREADS", "RAG_EMBEDDING_DEVICE")}
    saved_device = settings.RAG_EMBEDDING_DEVICE
    if hardware.threads:
        os.environ["RAG_TORCH_THREADS"] = str(hardware.threads)
    if hardware.device:
        os.environ["RAG_EMBEDDING_DEVICE"] = settings.RAG_EMBEDDING_DEVICE = hardware.device
    try:
        yield
    finally:
        settings.RAG_EMBEDDING_DEVICE = saved_device
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def _helpers_started(hardware: Hardware, model) -> Iterator["Helpers | None"]:
    """``hardware.processes - 1`` bulk worker processes with the model loaded, and the job's ``helpers`` that sends
    them its batches; None (and nothing started) for one process."""
    if hardware.processes <= 1:
        yield None
        return
    import tempfile

    from django.conf import settings

    from measure.bench_workers import until, workers_started
    from measure.tasks import bench_warm_task
    from sources.queues import BULK
    from sources.tasks import vectors_helpers_send

    helpers = hardware.processes - 1
    env = {
        "RAG_TORCH_THREADS": str(hardware.threads or 0),
        "RAG_EMBEDDING_DEVICE": settings.RAG_EMBEDDING_DEVICE,
        # The model the job's rows name (the instant stand-in's too, and where it answers).
        "RAG_EMBEDDING_MODEL": settings.RAG_EMBEDDING_MODEL,
        "RAG_LLM_BASE_URL": settings.RAG_LLM_BASE_URL,
    }
    with workers_started("index", env=env, concurrency=helpers), tempfile.TemporaryDirectory() as barrier:
        for _ in range(helpers):
            bench_warm_task.apply_async(
                (model.provider, model.name, settings.RAG_EMBEDDING_DEVICE, barrier, helpers), queue=BULK
            )
        if until(lambda: len(os.listdir(barrier)) >= helpers, 600) is None:
            raise ApplicationError(f"rag_bench index: {helpers} worker processes did not load the model in 600 s")
        time.sleep(0.2)  # the last of them returns from its warm-up
        yield vectors_helpers_send


def _index_bench(root: Path, hardware: Hardware) -> dict:
    from django.conf import settings
    from django.db import connection

    from sources import jobs, pipeline, roots
    from sources.chunking import chunk_text
    from sources.config import embedding_config
    from sources.embedding import embedder_for
    from sources.ingest import embed_text, embedding_model_for
    from sources.models import DEFAULT_EXCLUDE_DIRS, DEFAULT_INCLUDE, Chunk, IndexJob, WorkspaceRoot, words
    from sources.walk import Candidate, WalkRules, read_text, root_open, walk

    # Its jobs refuse a root outside RAG_ROOT_BASE_DIRS: say so before anything is timed.
    roots.root_path_validate(str(root.resolve()))
    model = embedding_model_for(config=embedding_config())
    rules = WalkRules(
        include=tuple(words(DEFAULT_INCLUDE)),
        exclude_dirs=frozenset(words(DEFAULT_EXCLUDE_DIRS)),
        max_file_bytes=500_000,
    )
    texts: list[str] = []
    root_fd = root_open(str(root.resolve()))
    try:
        for entry in walk(root_fd, rules):
            if isinstance(entry, Candidate) and isinstance(text := read_text(root_fd, entry, rules), str):
                chunks = chunk_text(
                    text, entry.path, max_chars=settings.RAG_CHUNK_MAX_CHARS, overlap=settings.RAG_CHUNK_OVERLAP
                )
                texts.extend(embed_text(chunk, entry.path) for chunk in chunks)
    finally:
        os.close(root_fd)
    embedder = embedder_for(provider=model.provider, name=model.name, device=settings.RAG_EMBEDDING_DEVICE)
    embedder.embed(texts[:64], batch_size=settings.RAG_EMBED_BATCH_SIZE)  # warm-up, not timed
    encode_seconds = encode_cpu = 0.0
    if hardware.raw:
        started, cpu_started = time.perf_counter(), time.process_time()
        embedder.embed(texts, batch_size=settings.RAG_EMBED_BATCH_SIZE)
        encode_seconds = time.perf_counter() - started
        encode_cpu = time.process_time() - cpu_started
    inside = EmbedTimer(embedder)

    bench_root = WorkspaceRoot.objects.create(
        name=f"bench {time.time_ns()}", path=str(root.resolve()), reverify_minutes=0
    )
    try:
        with _helpers_started(hardware, model) as helpers:

            def run() -> tuple[IndexJob, float]:
                # Run in this process, not queued: the bench times the work itself (its vector batches shared
                # with the helpers). Not forced: the second run is the re-verify of unchanged files.
                job = jobs.job_start(job_id=IndexJob.objects.create(root=bench_root, trigger="bench").pk)
                assert job is not None  # a root created just now: no other job holds its lock
                begin = time.perf_counter()
                pipeline.root_index(job=job, helpers=helpers)
                elapsed = time.perf_counter() - begin
                job.refresh_from_db()
                return job, elapsed

            with inside:
                cpu_started = time.process_time()
                first, index_seconds = run()
                index_cpu = time.process_time() - cpu_started
            second, reverify_seconds = run()
    finally:
        bench_root.delete()
        # Deleted chunks stay in their model's HNSW graph until a vacuum: the next run would insert among them and
        # pay for it (Django's source, instant encoder: the vector writes took 76 s on a fourth run without a vacuum
        # between, 46 s on the first).
        with connection.cursor() as cursor:
            cursor.execute(f"VACUUM {Chunk._meta.db_table}")
    query_seconds = query_latency(model.provider, model.name, device=settings.RAG_EMBEDDING_DEVICE)
    encode_rate = len(texts) / encode_seconds if encode_seconds else 0.0
    index_rate = first.chunks_embedded / index_seconds if index_seconds else 0.0
    return {
        "model": model.name,
        "runs_on": getattr(embedder, "runs_on", "") or model.provider,
        "files": first.files_total,
        "chunks": first.chunks_embedded,
        "encode_chunks_per_s": round(encode_rate, 1),
        "index_chunks_per_s": round(index_rate, 1),
        "ratio": round(index_rate / encode_rate, 3) if encode_rate else 0.0,
        "index_seconds": round(index_seconds, 2),
        # Where the end-to-end run's time went: inside embed() and everything else (walk, read, chunk, write).
        "index_embed_seconds": round(inside.seconds, 2),
        "index_other_seconds": round(index_seconds - inside.seconds, 2),
        # This process's CPU per chunk (PostgreSQL's is its own): on a busy machine wall-clock rates
        # measure the neighbours, CPU time far less so.
        "encode_cpu_ms_per_chunk": round(1000 * encode_cpu / len(texts), 2) if texts and encode_cpu else None,
        "index_cpu_ms_per_chunk": round(1000 * index_cpu / first.chunks_embedded, 2) if first.chunks_embedded else None,
        "load_average": [round(load, 2) for load in os.getloadavg()],
        "reverify_seconds": round(reverify_seconds, 3),
        "reverify_embedded": second.chunks_embedded,
        "query_p50_ms": percentile_ms(query_seconds, 50) if query_seconds else None,
        "query_p95_ms": percentile_ms(query_seconds, 95) if query_seconds else None,
    }


class EmbedTimer:
    """Adds up the seconds an embedder spends in ``embed`` while the ``with`` block runs."""

    def __init__(self, embedder) -> None:
        self.embedder = embedder
        self.seconds = 0.0

    def __enter__(self) -> "EmbedTimer":
        inner = self.embedder.embed

        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started

        self.embedder.embed = timed  # the registry hands indexing this same instance
        return self

    def __exit__(self, *exc: object) -> None:
        del self.embedder.embed  # the class's method again


def query_latency(provider: str, name: str, *, device: str, repeats: int = QUERY_REPEATS) -> list[float]:
    """Seconds to embed one short query, one thread, as a web process does (RAG_TORCH_THREADS=1).

    A fresh embedder of its own: threads are fixed when a model loads, and
    the bulk encoder above keeps every core. API models: none (the network decides).
    """
    if provider != "local":
        return []
    from sources.embedding.local import LocalEmbedder

    saved_env = os.environ.get("RAG_TORCH_THREADS")
    os.environ["RAG_TORCH_THREADS"] = "1"
    import torch

    saved_threads = torch.get_num_threads()
    try:
        embedder = LocalEmbedder(name, device=device)
        embedder.embed([QUERY])
        torch.set_num_threads(1)  # process-wide: the PyTorch model reads it at every call
        timings = []
        for _ in range(repeats):
            started = time.perf_counter()
            embedder.embed([QUERY])
            timings.append(time.perf_counter() - started)
        return timings
    finally:
        torch.set_num_threads(saved_threads)
        if saved_env is None:
            os.environ.pop("RAG_TORCH_THREADS", None)
        else:
            os.environ["RAG_TORCH_THREADS"] = saved_env


def vectors_bench(root: Path, *, count: int = 1000, device: str = "cuda") -> dict:
    """The local model's vectors on ``device`` against PyTorch fp32 on the CPU, for the first ``count`` chunks of
    ``root`` as indexing embeds them, and ``device``'s raw encode rate at RAG_EMBED_BATCH_SIZE.

    The identity rule of a model's vectors (docs/sources.md): cosine >= 0.999 to the CPU's fp32 for every text.
    """
    from django.conf import settings

    from sources.embedding.backends import local_name_parse
    from sources.embedding.local import LocalEmbedder
    from sources.ingest import embed_text

    texts: list[str] = []
    for path, text in text_files(root):
        name = str(path.relative_to(root))
        chunks = chunk_text(text, name, max_chars=settings.RAG_CHUNK_MAX_CHARS, overlap=settings.RAG_CHUNK_OVERLAP)
        texts.extend(embed_text(chunk, name) for chunk in chunks)
        if len(texts) >= count:
            break
    texts = texts[:count]
    if not texts:
        raise ApplicationError(f"rag_bench vectors: no text file to chunk under {root}")
    model = local_name_parse(settings.RAG_EMBEDDING_MODEL)[0]  # PyTorch on both sides: the reference is torch fp32
    reference = LocalEmbedder(model, device="cpu").embed(texts, batch_size=64)
    other = LocalEmbedder(model, device=device)
    other.embed(texts[:64], batch_size=64)  # loads the model and settles its precision, not timed
    started = time.perf_counter()
    vectors = other.embed(texts, batch_size=settings.RAG_EMBED_BATCH_SIZE)
    seconds = time.perf_counter() - started
    cosines = (reference * vectors).sum(axis=1)
    return {
        "texts": len(texts),
        "runs_on": other.runs_on,
        "batch_size": settings.RAG_EMBED_BATCH_SIZE,
        "encode_chunks_per_s": round(len(texts) / seconds, 1) if seconds else None,
        "cosine_min": round(float(cosines.min()), 6),
        "cosine_mean": round(float(cosines.mean()), 6),
        "identity_rule_met": bool(cosines.min() >= 0.999),
    }
