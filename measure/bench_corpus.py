"""The search bench's corpus: N chunks of real text in one hidden source.

Text: source code and documentation of installed packages (django, numpy,
celery, ...), their files shuffled with a fixed seed and cut by the
project's own ``chunk_text`` until N chunks; past what the packages hold,
copies with a tenth of their lines dropped. Vectors: the first few thousand
chunks are embedded with the real model; every other chunk gets a unit-length
random mixture of 2-3 of those real vectors plus a little noise
(``mixed_vectors``), so the vectors lie where real ones do without embedding
100k texts. A synthetic chunk's vector is not its text's: the corpus measures
speed and index recall, not retrieval quality.

Checked against the real thing: the same 10k chunks all embedded gave HNSW
recall@10 0.907 (ef_search 100) and 0.783 (40); 3,000 real vectors plus
mixtures 0.913 and 0.776. Mixing only vectors of the same package (tried
first) packed them too tightly: 0.757 and 0.627, a pessimistic index.

Where it lives: a Source of kind "file", key ``bench:N``, visible to bot
``rag-bench`` only (keys of that bot, and superusers, who see everything):
no other caller's search ever sees it. One corpus at a time: building another
size drops the old one, so the indexes hold only the corpus being measured.
``rag_bench search --drop`` removes it.
"""

import dataclasses
import hashlib
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from measure import bench_bulk
from sources.chunking import ChunkResult, chunk_text, chunker_identity
from sources.config import embedding_config
from sources.embedding import embedder_for
from sources.ingest import embed_text, embedding_model_for, embedding_model_index_ensure
from sources.models import Chunk, EmbeddingModel, Source, unowned_source_key

BENCH_BOT = "rag-bench"
# Read in this order of preference; whichever are installed (django always is).
PACKAGES = (
    "django",
    "numpy",
    "celery",
    "kombu",
    "sympy",
    "scipy",
    "networkx",
    "jinja2",
    "click",
    "pydantic",
    "transformers",
    "sentence_transformers",
    "hypothesis",
    "sqlparse",
    "torch",
)
TEXT_SUFFIXES = {".py", ".pyi", ".md", ".rst", ".txt", ".html", ".js", ".c", ".h", ".cpp"}
MAX_FILE_BYTES = 500_000  # the indexer's default limit
# Components of the noise added to a mixture: about 0.1 of a unit vector's length in all.
NOISE_SCALE = 0.1
COPY_ROWS = 5000  # rows per COPY, each batch in its own transaction
# The lexical channel's index (retrieval/models/lexical.py), kept by triggers on the chunk table.
LEXICAL_TABLES = ("retrieval_posting", "retrieval_term", "retrieval_lexical_source")
# The most chunks embedded for real by default (a few minutes on two cores).
EMBEDDED_DEFAULT = 3000
# Chunks after the embedded ones whose real vectors are embedded too, as queries (the corpus gets mixtures there).
HELD_OUT = 200
# Bumped whenever the recipe changes, so an older corpus is rebuilt, not reused.
CORPUS_VERSION = 2


@dataclass
class CorpusBuild:
    source: Source
    chunks: int
    built: bool  # False: an existing corpus of this size was reused
    embedded: int = 0  # chunks embedded with the real model
    seconds: dict[str, float] = field(default_factory=dict)  # by step; "total" for all

    def as_dict(self) -> dict:
        return {
            "chunks": self.chunks,
            "built": self.built,
            "embedded": self.embedded,
            "source_key": self.source.key,
            "build_seconds": {step: round(s, 2) for step, s in self.seconds.items()},
        }


@dataclass(frozen=True, slots=True)
class BenchText:
    path: str  # relative to site-packages, e.g. django/http/response.py
    chunk: ChunkResult


def package_files(*, seed: int) -> list[tuple[Path, str]]:
    """Text files of the ``PACKAGES`` installed beside Django, shuffled with ``seed``:
    (file, its path relative to site-packages)."""
    import django

    site_packages = Path(django.__file__).resolve().parent.parent
    found = []
    for name in PACKAGES:
        top = site_packages / name
        for path in sorted(top.rglob("*")) if top.is_dir() else ():
            if path.suffix in TEXT_SUFFIXES and "__pycache__" not in path.parts and path.is_file():
                found.append((path, f"{name}/{path.relative_to(top).as_posix()}"))
    random.Random(seed).shuffle(found)
    return found


def package_texts(*, seed: int) -> Iterator[tuple[Path, str, str]]:
    """(file, its path relative to site-packages, its text) of ``package_files`` that the indexer would read as
    text: under MAX_FILE_BYTES, UTF-8, no NUL (PostgreSQL text cannot hold one)."""
    for path, relative in package_files(seed=seed):
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                continue
            text = path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if "\x00" not in text:
            yield path, relative, text


def bench_texts(count: int, *, seed: int) -> list[BenchText]:
    """``count`` chunks cut from package files; copies with dropped lines once the files run out."""
    texts: list[BenchText] = []
    for _, relative, text in package_texts(seed=seed):
        if len(texts) >= count:
            break
        chunks = chunk_text(text, relative, max_chars=settings.RAG_CHUNK_MAX_CHARS, overlap=settings.RAG_CHUNK_OVERLAP)
        texts.extend(BenchText(relative, chunk) for chunk in chunks if chunk.content.strip())
    if not texts:
        raise RuntimeError(f"no text files found in the installed packages {', '.join(PACKAGES)}")
    real = len(texts)
    rng = random.Random(seed)
    copy = 0
    while len(texts) < count:
        copy += 1
        for original in texts[:real]:
            if len(texts) >= count:
                break
            lines = original.chunk.content.split("\n")
            kept = [line for line in lines if rng.random() >= 0.1] or lines[:1]
            chunk = dataclasses.replace(original.chunk, content="\n".join(kept))
            texts.append(BenchText(f"copy{copy}/{original.path}", chunk))
    return texts[:count]


def mixed_vectors(real: np.ndarray, count: int, *, seed: int) -> np.ndarray:
    """``count`` unit vectors, each a random convex mixture of 2-3 rows of ``real`` plus Gaussian noise."""
    rng = np.random.default_rng(seed)
    dims = real.shape[1]
    out = np.empty((count, dims), dtype=np.float32)
    for i in range(count):
        picks = rng.choice(len(real), size=min(int(rng.integers(2, 4)), len(real)), replace=False)
        mixed = rng.dirichlet(np.ones(len(picks))) @ real[picks] + rng.normal(0.0, NOISE_SCALE / np.sqrt(dims), dims)
        out[i] = mixed / np.linalg.norm(mixed)
    return out


def corpus_title(*, chunks: int, embedded: int, seed: int) -> str:
    """What the corpus was built from: a corpus is reused only when all of it matches."""
    return f"rag_bench corpus v{CORPUS_VERSION}: {chunks} chunks, {embedded} embedded, seed {seed}"


def bench_source(*, chunks: int, embedded: int, seed: int) -> Source | None:
    """The finished corpus built this way, if the database holds one."""
    source = Source.objects.filter(
        key=unowned_source_key("bench", chunks),
        enabled=True,
        title=corpus_title(chunks=chunks, embedded=embedded, seed=seed),
    ).first()
    if source is None or Chunk.objects.filter(source=source).count() != chunks:
        return None
    return source


def bench_corpus_drop() -> int:
    """Remove every bench corpus; returns the chunks deleted.

    The chunk table's indexes are rebuilt afterwards: VACUUM alone leaves an
    HNSW index at the size of its largest corpus, and PostgreSQL then priced
    a 10k corpus's vector query above a sequential scan (measured: 41 ms per
    query and recall 1.0, against 2 ms with a rebuilt index). CONCURRENTLY,
    so searches on a shared database (--yes) go on meanwhile.
    """
    # A bench corpus is the bench bot's file source under no root (a root's sources point to it).
    corpora = Source.objects.filter(bot_id=BENCH_BOT, kind=Source.Kind.FILE, root__isnull=True)
    ids = list(corpora.values_list("pk", flat=True))
    if not ids:
        return 0
    with transaction.atomic(), connection.cursor() as cursor:
        # The lexical index's rows go by source in three statements; the
        # delete triggers would find them one by one (millions of postings).
        # Turning triggers off needs a superuser (the embedded server's); a
        # shared database's user deletes through the triggers, slowly.
        try:
            with transaction.atomic():
                cursor.execute("SET LOCAL session_replication_role = replica")
            triggers_off = True
        except DatabaseError:
            triggers_off = False
        if triggers_off:
            for table in LEXICAL_TABLES:
                cursor.execute(f"DELETE FROM {table} WHERE source_id = ANY(%s)", [ids])
        cursor.execute("DELETE FROM sources_chunk WHERE source_id = ANY(%s)", [ids])
        deleted = cursor.rowcount
        if triggers_off:
            cursor.execute("SET LOCAL session_replication_role = DEFAULT")
        Source.objects.filter(pk__in=ids).delete()
    if not connection.in_atomic_block:  # neither may run inside a transaction
        with connection.cursor() as cursor:
            for table in ("sources_chunk", *LEXICAL_TABLES):
                for index in _table_indexes(cursor, table):
                    cursor.execute(f'REINDEX INDEX CONCURRENTLY "{index}"')
                cursor.execute(f"VACUUM ANALYZE {table}")
    return deleted


def _table_indexes(cursor, table: str) -> list[str]:
    """The table's own indexes, not its TOAST table's (which REINDEX TABLE would rebuild too).

    A concurrent build leaves out the rows deleted just before, while something
    older than any transaction (a replica's slot, with hot_standby_feedback)
    still keeps them from VACUUM. The next plain CREATE INDEX reads those rows
    and, for the HNSW index's expression, their vectors through the TOAST
    index, which then had no entry for them: "missing chunk number 0 for toast
    value" (seen in the test suite after the replica tests).
    """
    cursor.execute(
        "SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        "WHERE x.indrelid = %s::regclass ORDER BY 1",
        [table],
    )
    return [row[0] for row in cursor.fetchall()]


def real_vectors(texts: list[BenchText], *, model: EmbeddingModel, log=print) -> np.ndarray:
    """The model's vectors of ``texts``, cached under ``var/bench`` by the texts' and the model's hash, so a rebuild
    (another size, a dropped corpus) does not embed them again."""
    digest = hashlib.sha256(f"{model.provider}:{model.name}:{model.dimensions}".encode())
    for text in texts:
        digest.update(embed_text(text.chunk, text.path).encode())
        digest.update(b"\x00")
    path = settings.VAR_DIR / "bench" / f"vectors-{len(texts)}-{digest.hexdigest()[:16]}.npy"
    if path.exists():
        log(f"real vectors from {path}")
        return np.load(path)
    embedder = embedder_for(provider=model.provider, name=model.name, device=settings.RAG_EMBEDDING_DEVICE)
    vectors = embedder.embed(
        [embed_text(t.chunk, t.path) for t in texts], batch_size=settings.RAG_EMBED_BATCH_SIZE
    ).astype(np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path.with_suffix(".tmp.npy"), vectors)
    path.with_suffix(".tmp.npy").rename(path)  # whole or absent: a run stopped mid-write leaves no half file
    return vectors


def held_out_vectors(*, chunks: int, embedded: int | None = None, seed: int = 0) -> np.ndarray:
    """Real vectors of the ``HELD_OUT`` chunks after the embedded ones (the corpus holds mixtures in their place):
    queries that are real text vectors, for HNSW recall beside the query mix. Read from the cache."""
    count = min(chunks, EMBEDDED_DEFAULT if embedded is None else max(1, embedded))
    held_out = min(HELD_OUT, max(0, chunks - count))
    if not held_out:
        return np.empty((0, 0), dtype=np.float32)
    texts = bench_texts(count + held_out, seed=seed)
    model = embedding_model_for(config=embedding_config())
    return real_vectors(texts, model=model)[count:]


def bench_corpus_ensure(
    *, chunks: int, embedded: int | None = None, seed: int = 0, bulk_allowed: bool = False, log=print
) -> CorpusBuild:
    """The corpus of ``chunks`` chunks: reused when the database holds it, else built (any other size is dropped).

    ``bulk_allowed``: the database is this checkout's own (measure/bench_bulk.py drops and rebuilds indexes)."""
    started = time.perf_counter()
    if bulk_allowed:
        bench_bulk.indexes_restore(log=log)  # left dropped by an interrupted build
    config = embedding_config()
    model = embedding_model_for(config=config)
    count = min(chunks, EMBEDDED_DEFAULT if embedded is None else max(1, embedded))
    source = bench_source(chunks=chunks, embedded=count, seed=seed)
    if source is not None:
        return CorpusBuild(source=source, chunks=chunks, built=False, seconds={"total": time.perf_counter() - started})
    seconds: dict[str, float] = {}
    step = time.perf_counter()
    dropped = bench_corpus_drop()
    if dropped:
        log(f"dropped the previous bench corpus ({dropped} chunks)")
    seconds["drop"] = time.perf_counter() - step

    step = time.perf_counter()
    texts = bench_texts(chunks, seed=seed)
    seconds["chunk"] = time.perf_counter() - step
    log(f"cut {len(texts)} chunks from the installed packages in {seconds['chunk']:.1f} s")

    step = time.perf_counter()
    # The held-out chunks' real vectors are the "real-vector" recall queries; the corpus stores mixtures there.
    held_out = min(HELD_OUT, max(0, len(texts) - count))
    vectors_all = real_vectors(texts[: count + held_out], model=model, log=log)
    real = vectors_all[:count]
    seconds["embed"] = time.perf_counter() - step
    log(f"real vectors of {count + held_out} chunks ({model.name}) in {seconds['embed']:.1f} s")

    bulk = bulk_allowed and bench_bulk.can_bulk_load()
    if bulk:
        step = time.perf_counter()
        bench_bulk.indexes_drop(log=log)
        seconds["drop_indexes"] = time.perf_counter() - step
    step = time.perf_counter()
    # Disabled until complete: an interrupted build is never reused (bench_source) and is dropped next time.
    source = Source.objects.create(
        kind=Source.Kind.FILE,
        key=unowned_source_key("bench", chunks),
        bot_id=BENCH_BOT,
        enabled=False,
        title=corpus_title(chunks=chunks, embedded=count, seed=seed),
        embedding_model=model,
    )
    for offset in range(0, len(texts), COPY_ROWS):
        batch = texts[offset : offset + COPY_ROWS]
        vectors = [real[i] for i in range(offset, min(offset + len(batch), count))]
        if len(vectors) < len(batch):
            vectors.extend(mixed_vectors(real, len(batch) - len(vectors), seed=seed + offset))
        _copy(source, model, batch, vectors, first_index=offset, triggers=not bulk)
        if (offset // COPY_ROWS) % 20 == 19 or offset + len(batch) == len(texts):
            log(f"  loaded {offset + len(batch)} / {len(texts)} chunks ({time.perf_counter() - step:.0f} s)")
    seconds["load"] = time.perf_counter() - step

    if bulk:
        step = time.perf_counter()
        bench_bulk.postings_add(source_id=source.pk)
        seconds["postings"] = time.perf_counter() - step
        log(f"lexical postings of {len(texts)} chunks in {seconds['postings']:.0f} s")
        step = time.perf_counter()
        if not connection.in_atomic_block:
            # The corpus dropped before this build left its rows dead but not yet vacuumed: an index build reads
            # such rows, and an autovacuum of the TOAST table meanwhile can take their values from under it
            # ("missing chunk number 0 for toast value", seen once in CI). Gone first, nothing to race with.
            with connection.cursor() as cursor:
                cursor.execute(f"VACUUM {Chunk._meta.db_table}")
        built = bench_bulk.indexes_restore(log=log)
        seconds["indexes"] = time.perf_counter() - step
        seconds["hnsw"] = built.get(model.hnsw_index_name, 0.0)
    step = time.perf_counter()
    with bench_bulk.hnsw_build_settings():
        embedding_model_index_ensure(model=model, ef_construction=config.hnsw_ef_construction)
    with connection.cursor() as cursor:
        # VACUUM too: index-only reads of the postings need the visibility
        # map, which autovacuum would set only some minutes later.
        analyze = "ANALYZE" if connection.in_atomic_block else "VACUUM ANALYZE"  # VACUUM may not run in a transaction
        for table in ("sources_chunk", "sources_source", *LEXICAL_TABLES):
            cursor.execute(f"{analyze} {table}")
    Source.objects.filter(pk=source.pk).update(enabled=True)
    source.refresh_from_db()
    seconds["analyze"] = time.perf_counter() - step
    seconds["total"] = time.perf_counter() - started
    return CorpusBuild(source=source, chunks=len(texts), built=True, embedded=count, seconds=seconds)


_COLUMNS = (
    "source_id",
    "path",
    "generation",
    "chunk_index",
    "content",
    "context_prefix",
    "language",
    "symbol",
    "start_line",
    "end_line",
    "content_hash",
    "embedding",
    "embedding_model_id",
    "chunking_version",
    "metadata",
    "created_at",
)


def _copy(
    source: Source,
    model: EmbeddingModel,
    texts: list[BenchText],
    vectors: list[np.ndarray],
    *,
    first_index: int,
    triggers: bool = True,
) -> None:
    """One COPY of ``texts`` into the chunk table (the tsvector is computed by PostgreSQL, a generated column)."""
    now = timezone.now()
    # %g of each component, formatted by one C-level % per row: a Python loop per number took longer than the COPY.
    row_format = "[" + ",".join(["%.6g"] * int(model.dimensions)) + "]"
    with transaction.atomic(), connection.cursor() as cursor:
        if not triggers:
            cursor.execute(bench_bulk.triggers_off_sql())
        with cursor.cursor.copy(f"COPY sources_chunk ({', '.join(_COLUMNS)}) FROM STDIN") as copy:
            for number, (text, vector) in enumerate(zip(texts, vectors, strict=True), start=first_index):
                chunk = text.chunk
                copy.write_row(
                    (
                        source.pk,
                        text.path,
                        0,
                        number,
                        chunk.content,
                        chunk.context_prefix,
                        chunk.language,
                        chunk.symbol,
                        chunk.start_line,
                        chunk.end_line,
                        hashlib.sha256(chunk.content.encode()).hexdigest(),
                        row_format % tuple(vector.tolist()),
                        model.pk,
                        chunker_identity(text.path),
                        "{}",
                        now,
                    )
                )
