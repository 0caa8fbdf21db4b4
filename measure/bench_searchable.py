"""`rag_bench searchable PATH`: seconds from a root's save to search finding it, by words and by meaning (issue 41).

Starts the workers `make run` starts (measure/bench_workers.py), then saves a
root on PATH as the admin does (the add view enqueues its first index job on
the bulk worker) and polls, every 50 ms, what search reads:

- first file by words: the first chunk in the root's active generation (the
  lexical index is written in the same transaction as the chunk);
- all by words: every file the job lists written (the job has left the
  reading phase: its chunks are all stored, each found by its words);
- all by meaning: the job has ended, every vector stored.

With ``until="words"`` it stops once all is searchable by words and reports the embedding rate measured so far
(chunks/s) with the chunks left, instead of waiting for the end. Times are wall-clock on whatever else the machine
is doing: say so with them.
"""

import shutil
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db.models import F

from kernel.errors import ApplicationError
from measure.bench_workers import POLL_SECONDS, wait, workers_started
from sources import jobs, tasks
from sources.models import ACTIVE_JOB_STATUSES, Chunk, IndexJob, JobStatus, WorkspaceRoot
from sources.progress import Phase

PREFIX = "bench-searchable"


def searchable_bench(
    path: Path,
    *,
    concurrency: int,
    until: str = "meaning",
    timeout: float = 7200.0,
    log: Callable[[str], None] = print,
) -> dict:
    path = path.resolve()
    WorkspaceRoot.objects.filter(name__startswith=PREFIX).delete()
    base_dirs = [*settings.RAG_ROOT_BASE_DIRS, str(path.parent)]
    settings.RAG_ROOT_BASE_DIRS = base_dirs  # this process only checks what the children are told below
    report: dict = {"path": str(path), "concurrency": concurrency}
    try:
        base_dirs.append(str(Path(settings.VAR_DIR) / PREFIX))
        env = {"RAG_ROOT_BASE_DIRS": ",".join(base_dirs)}
        with workers_started(PREFIX, env=env, concurrency=concurrency):
            # A running product's workers have their model loaded (sources/celery_hooks.py warms it as a worker
            # starts): a one-file root first, so the time measured is the root's, not a cold start's.
            warm = Path(settings.VAR_DIR) / PREFIX / "warm"
            warm.mkdir(parents=True, exist_ok=True)
            (warm / "warm.md").write_text("# Warm\n\nThe worker has its model loaded.\n")
            settings.RAG_ROOT_BASE_DIRS = base_dirs
            warm_root = WorkspaceRoot.objects.create(name=f"{PREFIX} warm", path=str(warm), cooldown_seconds=0)
            warm_job, _ = tasks.root_reindex_request(root_id=warm_root.pk, ignore_cooldown=True, trigger="bench")
            wait(lambda: _ended(warm_job.pk), 600, "the warm-up root's job", prefix="searchable")
            log(f"workers up and warm (bulk: {concurrency} process(es)); saving a root on {path} ...")
            saved = time.monotonic()
            root = WorkspaceRoot.objects.create(
                name=f"{PREFIX} {path.name}", path=str(path), cooldown_seconds=0, reverify_minutes=0
            )
            # What the admin's add view does once the root and its segments are saved.
            tasks.root_reindex_request(root_id=root.pk, ignore_cooldown=True, trigger="bench")
            report.update(_watch(root, saved, until=until, timeout=timeout, log=log))
    finally:
        for job in IndexJob.objects.filter(root__name__startswith=PREFIX, status__in=ACTIVE_JOB_STATUSES):
            jobs.job_cancel(job_id=job.pk, by="rag_bench searchable (done measuring)")
        WorkspaceRoot.objects.filter(name__startswith=PREFIX).delete()
        shutil.rmtree(Path(settings.VAR_DIR) / PREFIX, ignore_errors=True)
    return report


def _watch(root: WorkspaceRoot, saved: float, *, until: str, timeout: float, log: Callable[[str], None]) -> dict:
    found: dict = {"first_file_s": None, "all_words_s": None, "all_meaning_s": None}
    job: IndexJob | None = None
    words_at_chunks = 0
    while time.monotonic() - saved < timeout:
        elapsed = time.monotonic() - saved
        if found["first_file_s"] is None and _searched(root).exists():
            found["first_file_s"] = elapsed
            log(f"  first file searchable by words after {elapsed:.1f} s")
        job = IndexJob.objects.filter(root=root).order_by("-pk").first()
        if job is not None and found["all_words_s"] is None and _words_done(job):
            found["all_words_s"] = elapsed
            words_at_chunks = job.chunks_embedded
            found["files"] = _searched(root).values("path").distinct().count()
            found["chunks"] = _searched(root).count()
            log(f"  all {found['files']:,} files ({found['chunks']:,} chunks) searchable by words: {elapsed:.1f} s")
            if until == "words":
                found["chunks_to_embed"] = job.chunks_queued
                time.sleep(60.0)  # a minute of the second stage, for its pace
                job.refresh_from_db()
                found["embed_chunks_per_s"] = (job.chunks_embedded - words_at_chunks) / 60.0
                break
        if job is not None and job.status not in ACTIVE_JOB_STATUSES:
            if job.status != JobStatus.SUCCEEDED:
                raise ApplicationError(f"rag_bench searchable: index job {job.pk} {job.status}: {job.message}")
            found["all_meaning_s"] = elapsed
            found["chunks_to_embed"] = job.chunks_queued
            span = elapsed - (found["all_words_s"] or 0.0)
            found["embed_chunks_per_s"] = job.chunks_embedded / span if span > 0 else None
            log(f"  all searchable by meaning after {elapsed:.1f} s ({job.chunks_embedded:,} chunks embedded)")
            break
        time.sleep(POLL_SECONDS)
    else:
        raise ApplicationError(f"rag_bench searchable: not done after {timeout:.0f} s")
    return found


def _ended(job_id: int) -> bool:
    return IndexJob.objects.filter(pk=job_id).exclude(status__in=ACTIVE_JOB_STATUSES).exists()


def _searched(root: WorkspaceRoot):
    return Chunk.objects.filter(source__root=root, generation=F("source__active_generation"))


def _words_done(job: IndexJob) -> bool:
    """Every listed file is written: the job embeds what it wrote, or has ended."""
    return job.phase in (Phase.EMBEDDING, Phase.FINISHING) or job.status not in ACTIVE_JOB_STATUSES


def searchable_table(report: dict) -> list[str]:
    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:,.1f} s"

    rate = report.get("embed_chunks_per_s")
    return [
        f"  root: {report['path']} ({report.get('files', 0):,} files, {report.get('chunks', 0):,} chunks); "
        f"bulk worker processes: {report['concurrency']}",
        f"  {'first file searchable by words':<34} {seconds(report['first_file_s']):>10}",
        f"  {'all files searchable by words':<34} {seconds(report['all_words_s']):>10}",
        f"  {'all searchable by meaning':<34} {seconds(report['all_meaning_s']):>10}",
        f"  {'embedding pace (second stage)':<34} {'-' if rate is None else f'{rate:,.1f} chunks/s':>10}"
        + (f"  ({report['chunks_to_embed']:,} chunks to embed)" if report.get("chunks_to_embed") else ""),
    ]
