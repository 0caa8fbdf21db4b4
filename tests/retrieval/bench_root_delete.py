"""Timing, not a test (not collected: run it by name): delete a root of BENCH_CHUNKS generated chunks.

    BENCH_CHUNKS=13000 .venv/bin/pytest -q -s tests/retrieval/bench_root_delete.py

Each chunk holds 120 words (a third from 20,000, the rest from 500), about 118
postings. BENCH_EXPLAIN=1 prints every statement's plan and time (auto_explain),
the lexical triggers' own statements included.
"""

import os
import random
import time

import pytest
from django.db import connection

from sources.models import Chunk, Source, WorkspaceRoot

pytestmark = pytest.mark.django_db

N = int(os.environ.get("BENCH_CHUNKS", "2000"))
VOCAB = [f"w{i:05d}x" for i in range(20000)]


def build(root, n, rng):
    source = Source.objects.get(pk=root.source_id)
    batch = []
    for i in range(n):
        words = [rng.choice(VOCAB[:500]) if j % 3 else rng.choice(VOCAB) for j in range(120)]
        batch.append(
            Chunk(
                source=source,
                path=f"d{i // 400}/f{i // 8}.py",
                chunk_index=i % 8,
                content=" ".join(words),
                symbol=f"Sym{i}",
                start_line=1,
                end_line=2,
                content_hash=str(i),
                chunking_version="t",
            )
        )
        if len(batch) == 2000:
            Chunk.objects.bulk_create(batch)
            batch = []
    Chunk.objects.bulk_create(batch)


def counts():
    with connection.cursor() as c:
        out = []
        for t in ("retrieval_posting", "retrieval_term", "retrieval_lexical_source", "sources_chunk"):
            c.execute(f"SELECT count(*) FROM {t}")
            out.append(c.fetchone()[0])
    return out


def test_time_root_delete(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    (tmp_path / "b").mkdir()
    rng = random.Random(7)
    root = WorkspaceRoot.objects.create(name="b", path=str(tmp_path / "b"), cooldown_seconds=0, watch=False)
    t = time.perf_counter()
    build(root, N, rng)
    print(f"\nbuilt {N} chunks in {time.perf_counter() - t:.2f}s; rows {counts()}")
    with connection.cursor() as c:
        c.execute("ANALYZE")
    if os.environ.get("BENCH_EXPLAIN"):
        notes = []
        connection.ensure_connection()
        connection.connection.add_notice_handler(lambda d: notes.append(d.message_primary))
        with connection.cursor() as c:
            c.execute(
                "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; "
                "SET auto_explain.log_nested_statements = on; SET client_min_messages = log"
            )
    t = time.perf_counter()
    root.delete()
    if os.environ.get("BENCH_EXPLAIN"):
        with connection.cursor() as c:
            c.execute("SET client_min_messages = notice; SET auto_explain.log_min_duration = -1")
        print("\n".join(notes))
    print(f"DELETE root of {N} chunks: {time.perf_counter() - t:.2f}s; rows after {counts()}")
