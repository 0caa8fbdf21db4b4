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

A web root instead (``site``): the bench copies the directory (Python's documentation from Debian's python3-doc,
say), serves the copy on 127.0.0.1 with the standard library's server (which answers If-Modified-Since with 304)
and saves a web root on its start page, allowing the loopback address for its own workers only. With ``again``,
once the first crawl is searchable by words: a second crawl of the unchanged site (how many page bodies it fetched),
then one after a page is removed from the copy (whether the page left search), each timed until it is searchable
by words, the vectors of the first left to come.
"""

import functools
import shutil
import threading
import time
from collections.abc import Callable
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

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
    site: bool = False,
    again: bool = False,
    timeout: float = 7200.0,
    log: Callable[[str], None] = print,
) -> dict:
    path = path.resolve()
    WorkspaceRoot.objects.filter(name__startswith=PREFIX).delete()
    base = Path(settings.VAR_DIR) / PREFIX
    shutil.rmtree(base, ignore_errors=True)
    base_dirs = [*settings.RAG_ROOT_BASE_DIRS, str(path.parent), str(base)]
    settings.RAG_ROOT_BASE_DIRS = base_dirs  # this process only checks what the children are told below
    env = {"RAG_ROOT_BASE_DIRS": ",".join(base_dirs)}
    report: dict = {"path": str(path), "concurrency": concurrency}
    server: _Server | None = None
    try:
        if site:
            copy = base / "site"
            shutil.copytree(path, copy)  # the copy loses a page; the files keep their times (304 answers)
            server = _serve(copy)
            url = f"http://127.0.0.1:{server.server_address[1]}/index.html"
            env["RAG_WEB_ALLOW_PRIVATE"] = "true"  # the bench's own server, for the bench's own workers
            report.update(url=url, pages_on_disk=sum(1 for _ in copy.rglob("*.html")))
        with workers_started(PREFIX, env=env, concurrency=concurrency):
            _warm(base, concurrency=concurrency, log=log)
            log(f"saving a root on {url if site else path} ...")
            saved = time.monotonic()
            root = WorkspaceRoot.objects.create(
                name=f"{PREFIX} {path.name}",
                path=url if site else str(path),
                web_url=url if site else "",
                watch=False,
                cooldown_seconds=0,
                reverify_minutes=0,
            )
            # What the admin's add view does once the root and its segments are saved.
            tasks.root_reindex_request(root_id=root.pk, ignore_cooldown=True, trigger="bench")
            report.update(_watch(root, saved, until="words" if again else until, timeout=timeout, log=log))
            if site and again:
                assert server is not None
                report["again"] = _crawls_again(root, base / "site", server, timeout=timeout, log=log)
    finally:
        for job in IndexJob.objects.filter(root__name__startswith=PREFIX, status__in=ACTIVE_JOB_STATUSES):
            jobs.job_cancel(job_id=job.pk, by="rag_bench searchable (done measuring)")
        WorkspaceRoot.objects.filter(name__startswith=PREFIX).delete()
        if server is not None:
            server.shutdown()
            server.server_close()
        shutil.rmtree(base, ignore_errors=True)
    return report


def _warm(base: Path, *, concurrency: int, log: Callable[[str], None]) -> None:
    """A running product's workers have their model loaded (sources/celery_hooks.py warms it as a worker starts): a
    one-file root first, so the time measured is the root's, not a cold start's."""
    warm = base / "warm"
    warm.mkdir(parents=True, exist_ok=True)
    (warm / "warm.md").write_text("# Warm\n\nThe worker has its model loaded.\n")
    warm_root = WorkspaceRoot.objects.create(name=f"{PREFIX} warm", path=str(warm), cooldown_seconds=0)
    warm_job, _ = tasks.root_reindex_request(root_id=warm_root.pk, ignore_cooldown=True, trigger="bench")
    wait(lambda: _ended(warm_job.pk), 600, "the warm-up root's job", prefix="searchable")
    log(f"workers up and warm (bulk: {concurrency} process(es))")


def _crawls_again(
    root: WorkspaceRoot, copy: Path, server: "_Server", *, timeout: float, log: Callable[[str], None]
) -> dict:
    """The site crawled again unchanged, then with a page removed: each crawl timed until searchable by words."""
    found: dict = {}
    for step in ("unchanged", "page removed"):
        for running in IndexJob.objects.filter(root=root, status__in=ACTIVE_JOB_STATUSES):
            jobs.job_cancel(job_id=running.pk, by="rag_bench searchable (crawling again)")  # its vectors come later
        removed = ""
        if step == "page removed":
            # A page the first crawl indexed (not the start page): its file goes from the served copy.
            pages = sorted(set(_searched(root).exclude(path=root.web_url).values_list("path", flat=True)))
            removed = pages[len(pages) // 2]
            (copy / urlsplit(removed).path.lstrip("/")).unlink()
        started, bodies = time.monotonic(), len(server.bodies)
        job, _ = tasks.root_reindex_request(root_id=root.pk, ignore_cooldown=True, trigger="bench")
        wait(functools.partial(_job_words_done, job.pk), timeout, "a crawl", prefix="searchable")
        job.refresh_from_db()
        found[step] = {
            "seconds": round(time.monotonic() - started, 1),
            "page_bodies_sent": len(server.bodies) - bodies,  # counted by the server: 200 answers with a page
            "bodies_sent_for": sorted(set(server.bodies[bodies:]))[:10],
            "crawl": _crawl_summary(job),
        }
        if removed:
            found[step]["removed"] = removed
            found[step]["removed_searchable"] = _searched(root).filter(path=removed).exists()
        log(
            f"  crawled again ({step}): searchable by words in {found[step]['seconds']} s; "
            f"{found[step]['page_bodies_sent']} page bodies sent; {found[step]['crawl']}"
        )
    return found


def _crawl_summary(job: IndexJob) -> str:
    return f"{job.files_changed} fetched and written, {job.files_unchanged} not modified, {job.files_deleted} gone"


class _Server(ThreadingHTTPServer):
    bodies: list[str]  # the paths answered 200 with a page (a 304 sends none)


class _Pages(SimpleHTTPRequestHandler):
    server: _Server

    def send_response(self, code: int, message: str | None = None) -> None:
        if code == 200 and not self.path.endswith("robots.txt"):
            self.server.bodies.append(self.path)
        super().send_response(code, message)

    def log_message(self, format, *args) -> None:  # noqa: A002 - the stdlib's name
        pass


def _serve(directory: Path) -> _Server:
    server = _Server(("127.0.0.1", 0), functools.partial(_Pages, directory=str(directory)))
    server.bodies = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


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


def _job_words_done(job_id: int) -> bool:
    return _words_done(IndexJob.objects.get(pk=job_id))


def _words_done(job: IndexJob) -> bool:
    """Every listed file is written: the job embeds what it wrote, or has ended."""
    return job.phase in (Phase.EMBEDDING, Phase.FINISHING) or job.status not in ACTIVE_JOB_STATUSES


def searchable_table(report: dict) -> list[str]:
    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:,.1f} s"

    rate = report.get("embed_chunks_per_s")
    return [
        f"  root: {report.get('url', report['path'])} ({report.get('files', 0):,} files, {report.get('chunks', 0):,} "
        f"chunks); "
        f"bulk worker processes: {report['concurrency']}",
        *([f"  .html files in the served directory: {report['pages_on_disk']:,}"] if "pages_on_disk" in report else []),
        f"  {'first file searchable by words':<34} {seconds(report['first_file_s']):>10}",
        f"  {'all files searchable by words':<34} {seconds(report['all_words_s']):>10}",
        f"  {'all searchable by meaning':<34} {seconds(report['all_meaning_s']):>10}",
        f"  {'embedding pace (second stage)':<34} {'-' if rate is None else f'{rate:,.1f} chunks/s':>10}"
        + (f"  ({report['chunks_to_embed']:,} chunks to embed)" if report.get("chunks_to_embed") else ""),
    ]
