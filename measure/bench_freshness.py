"""`rag_bench freshness`: how long a change to a watched root takes to reach search (issue 25 item 5).

Starts what `make run` starts for it (a worker per queue, the watcher) as
supervised children on this checkout's database, indexes a small watched
root, then edits, creates, renames and deletes its files one at a time and
times each from the change on disk until search reads it (the chunk is in the
source's active generation) or no longer does. The same again while a bulk
job (a large root's first index) runs beside it, and a skill saved meanwhile.
Git rows: a git root cloned from a local bare repository; each round pushes
a commit of 10 changed files, delivers the signed push event through the
webhook's own code path (signature check, then the fetch job), and times it
until search reads all 10; then a push event with no new commit, timed until
its job has ended (it embeds nothing).
Times are wall-clock on whatever else the machine is doing: say so with them.
"""

import hashlib
import hmac
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db.models import F

from kernel.errors import ApplicationError
from measure.bench_workers import until as _until
from measure.bench_workers import wait, workers_started
from rag_site.supervisor import Supervisor
from sources import git_hooks, git_roots, jobs, tasks
from sources.config import git_config
from sources.models import ACTIVE_JOB_STATUSES, Chunk, IndexJob, JobStatus, Skill, WorkspaceRoot

PREFIX = "bench-freshness"
# Files of the watched root: small, so its own first index is quick.
WATCHED_FILES = 40
GIT_FILES = 10  # changed by each pushed commit: the "push of 10 changed files"
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.org",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.org",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}

BULK_PY = '''"""Bulk module {i}."""


def bulk_handler_{i}(request):
    """Handle bulk request {i}: validate, route and answer for the {topic} service."""
    payload = {{"id": {i}, "topic": "{topic}", "items": list(range({i} % 17))}}
    return payload


class BulkWorker{i}:
    """Runs bulk job {i} of the {topic} queue."""

    def run(self, items):
        return [item * {i} for item in items if item % 3]
'''
TOPICS = ["billing", "search", "auth", "storage", "email", "payments", "analytics"]


@dataclass(frozen=True, slots=True)
class FreshnessOptions:
    rounds: int = 20  # changes of each kind per phase
    bulk_files: int = 3000  # the bulk root's files: about 9,000 chunks, the "10k-chunk root"
    concurrency: int = 1  # the bulk worker's processes (make run: RAG_WORKER_CONCURRENCY); interactive has one
    timeout: float = 180.0  # one change's longest wait; past it the change counts as a timeout


def freshness_bench(options: FreshnessOptions, *, log: Callable[[str], None] = print) -> dict:
    base = Path(settings.VAR_DIR) / PREFIX
    _clean(base)
    watched_dir, bulk_dir = base / "watched", base / "bulk"
    watched_dir.mkdir(parents=True)
    for i in range(WATCHED_FILES):
        (watched_dir / f"module_{i}.py").write_text(f"def module_{i}():\n    return 'module {i}'\n")
    base_dirs = [*settings.RAG_ROOT_BASE_DIRS, str(base.resolve())]
    settings.RAG_ROOT_BASE_DIRS = base_dirs  # this process only checks what the children are told below
    env = {"RAG_ROOT_BASE_DIRS": ",".join(base_dirs), "RAG_WATCH": "true"}
    watched = WorkspaceRoot.objects.create(
        name=f"{PREFIX} watched", path=str(watched_dir.resolve()), cooldown_seconds=0, reverify_minutes=0, watch=True
    )
    report: dict = {"options": _fields(options)}
    try:
        with workers_started(PREFIX, env=env, concurrency=options.concurrency, watcher=True) as supervisor:
            _measure(
                options,
                report,
                watched=watched,
                watched_dir=watched_dir,
                bulk_dir=bulk_dir,
                base=base,
                supervisor=supervisor,
                log=log,
            )
    finally:
        Skill.objects.filter(slug__startswith=PREFIX).delete()
        WorkspaceRoot.objects.filter(name__startswith=PREFIX).delete()
        shutil.rmtree(base, ignore_errors=True)
    return report


def _measure(
    options: FreshnessOptions,
    report: dict,
    *,
    watched: WorkspaceRoot,
    watched_dir: Path,
    bulk_dir: Path,
    base: Path,
    supervisor: Supervisor,
    log: Callable[[str], None],
) -> None:
    log(
        f"workers up (bulk: {options.concurrency} process(es), interactive: 1); "
        f"indexing the watched root ({WATCHED_FILES} files) ..."
    )
    _job_done(_job_request(watched.pk), options.timeout * 2)
    watcher_log = supervisor.log_path("watcher")
    _wait(lambda: str(watched_dir.resolve()) in _text(watcher_log), 60, "the watcher to watch the root")

    log(f"idle: {options.rounds} edits, creates, renames and deletes ...")
    report["idle"] = _changes(watched, watched_dir, options, tag="idle")
    git_root, work = _git_root(base)
    _job_done(_job_request(git_root.pk), options.timeout * 2)
    log(f"idle: {options.rounds} pushes of {GIT_FILES} files, and push events with no new commit ...")
    report["idle"].update(_pushes(git_root, work, options, tag="idle"))

    for i in range(options.bulk_files):
        (bulk_dir / f"pkg_{i // 200}").mkdir(parents=True, exist_ok=True)
        (bulk_dir / f"pkg_{i // 200}" / f"bulk_{i}.py").write_text(BULK_PY.format(i=i, topic=TOPICS[i % 7]))
    bulk = WorkspaceRoot.objects.create(
        name=f"{PREFIX} bulk", path=str(bulk_dir.resolve()), cooldown_seconds=0, reverify_minutes=0, watch=False
    )
    bulk_job = _job_request(bulk.pk)
    _wait(lambda: _status(bulk_job) == JobStatus.RUNNING, options.timeout, "the bulk job to start")
    log(f"beside a bulk job ({options.bulk_files} files): the same changes, then skills saved ...")
    report["bulk"] = _changes(watched, watched_dir, options, tag="bulk", bulk_job=bulk_job)
    report["bulk"].update(_pushes(git_root, work, options, tag="bulk"))
    report["bulk"]["skill saved"] = _skills(options, bulk_job)
    bulk_final = IndexJob.objects.get(pk=bulk_job)
    report["bulk_job"] = {
        "status": bulk_final.status,
        "chunks_embedded": bulk_final.chunks_embedded,
        "files_total": bulk_final.files_total,
    }
    if bulk_final.status in ACTIVE_JOB_STATUSES:
        jobs.job_cancel(job_id=bulk_job, by="rag_bench freshness (done measuring)")


def _fields(options: FreshnessOptions) -> dict:
    return {name: getattr(options, name) for name in options.__slots__}


def _changes(
    root: WorkspaceRoot, directory: Path, options: FreshnessOptions, *, tag: str, bulk_job: int | None = None
) -> dict:
    """Edit, create, rename and delete ``options.rounds`` times each; seconds until search agrees, by kind."""
    times: dict[str, list[float | None]] = {"edit": [], "create": [], "rename": [], "delete": []}
    beside = 0
    for i in range(options.rounds):
        for kind, seconds in _round(root, directory, i, tag, options.timeout).items():
            times[kind].append(seconds)
        if bulk_job is not None and _status(bulk_job) == JobStatus.RUNNING:
            beside += 1
    summary: dict[str, dict | int] = {kind: _summary(values) for kind, values in times.items()}
    if bulk_job is not None:
        summary["rounds_with_bulk_running"] = beside
    return summary


def _round(root: WorkspaceRoot, directory: Path, i: int, tag: str, timeout: float) -> dict[str, float | None]:
    """One edit, create, rename and delete, each timed from the change on disk until search agrees."""
    token = f"fresh{tag}{i}x{uuid.uuid4().hex[:8]}"
    edited = f"module_{i % WATCHED_FILES}.py"
    created, moved = f"new_{tag}_{i}.py", f"moved_{tag}_{i}.py"
    times = {}
    (directory / edited).write_text(f"def edited_{i}():\n    return '{token}'\n")
    times["edit"] = _until(lambda: _has(root, edited, token), timeout)
    (directory / created).write_text(f"def created_{i}():\n    return '{token}'\n")
    times["create"] = _until(lambda: _has(root, created, token), timeout)
    (directory / created).rename(directory / moved)
    times["rename"] = _until(lambda: _has(root, moved, token) and not _has(root, created), timeout)
    (directory / moved).unlink()
    times["delete"] = _until(lambda: not _has(root, moved), timeout)
    return times


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **_GIT_ENV}, check=True, capture_output=True)


def _git_root(base: Path) -> tuple[WorkspaceRoot, Path]:
    """A bare repository of GIT_FILES * 3 files, a clone to push from, and a git root of it."""
    bare, work = base / "origin.git", base / "work"
    _git(base, "init", "--quiet", "--bare", "-b", "main", str(bare))
    _git(base, "init", "--quiet", "-b", "main", str(work))
    for i in range(GIT_FILES * 3):
        (work / f"service_{i}.py").write_text(f"def service_{i}():\n    return 'service {i}'\n")
    _git(work, "add", "--all")
    _git(work, "commit", "--quiet", "-m", "first")
    _git(work, "push", "--quiet", str(bare), "HEAD:refs/heads/main")
    root = WorkspaceRoot.objects.create(
        name=f"{PREFIX} git",
        path=git_roots.root_git_path(name=f"{PREFIX}-git", config=git_config()),
        git_url=f"file://{bare.resolve()}",
        cooldown_seconds=0,
        reverify_minutes=0,
        watch=False,
    )
    git_hooks.webhook_rotate(root=root, secret_key=settings.SECRET_KEY)
    return root, work


def _push_event(root: WorkspaceRoot) -> int:
    """A signed push event through the webhook's own path: the signature checked, then the fetch job requested."""
    body = b'{"ref": "refs/heads/main"}'
    secret = git_hooks.webhook_secret(root=root, secret_key=settings.SECRET_KEY)
    headers = {git_hooks.GITHUB_HEADER: "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()}
    if not git_hooks.webhook_verified(root=root, headers=headers, body=body, secret_key=settings.SECRET_KEY):
        raise ApplicationError("rag_bench freshness: the bench's own push event failed its signature check")
    return tasks.root_push_request(root_id=root.pk).pk


def _pushes(root: WorkspaceRoot, work: Path, options: FreshnessOptions, *, tag: str) -> dict:
    """Pushes of GIT_FILES changed files, each timed from the commit until search reads them all; and push events
    with no new commit, timed until their job has ended."""
    pushed: list[float | None] = []
    idle: list[float | None] = []
    embedded = 0
    for i in range(options.rounds):
        token = f"pushed{tag}{i}x{uuid.uuid4().hex[:8]}"
        start = time.monotonic()
        for n in range(GIT_FILES):
            (work / f"service_{(i * GIT_FILES + n) % (GIT_FILES * 3)}.py").write_text(
                f"def service_{n}():\n    return '{token} {n}'\n"
            )
        _git(work, "commit", "--quiet", "--all", "-m", token)
        _git(work, "push", "--quiet", str(work.parent / "origin.git"), "HEAD:refs/heads/main")
        _push_event(root)
        searchable = _until(partial(_all_pushed, root, token), options.timeout)
        pushed.append(None if searchable is None else time.monotonic() - start)
        _wait(lambda: not IndexJob.objects.filter(root=root, status__in=ACTIVE_JOB_STATUSES).exists(), 60, "the push")
        start = time.monotonic()
        job_id = _push_event(root)
        finished = _until(partial(_ended, job_id), options.timeout)
        idle.append(None if finished is None else time.monotonic() - start)
        embedded += IndexJob.objects.get(pk=job_id).chunks_embedded
    summary = {"git push 10": _summary(pushed), "git no commit": _summary(idle)}
    summary["git no commit"]["chunks_embedded"] = embedded
    return summary


def _all_pushed(root: WorkspaceRoot, token: str) -> bool:
    """Whether search reads every file of the push (``token`` in each)."""
    found = Chunk.objects.filter(source__root=root, generation=F("source__active_generation"), content__contains=token)
    return found.values("path").distinct().count() == GIT_FILES


def _ended(job_id: int) -> bool:
    return _status(job_id) not in ACTIVE_JOB_STATUSES


def _skill_saved(i: int, timeout: float) -> float | None:
    token = f"skillfresh{i}x{uuid.uuid4().hex[:8]}"
    Skill.objects.create(slug=f"{PREFIX}-{i}-{uuid.uuid4().hex[:6]}", body=f"# Bench skill {i}\n\n{token}\n")
    return _until(lambda: Chunk.objects.filter(source__kind="skill", content__contains=token).exists(), timeout)


def _skills(options: FreshnessOptions, bulk_job: int) -> dict:
    """Skills saved (as the admin saves them) while the bulk job runs: seconds until each is searchable."""
    times = [_skill_saved(i, options.timeout) for i in range(options.rounds)]
    summary = _summary(times)
    summary["bulk_running_at_end"] = _status(bulk_job) == JobStatus.RUNNING
    return summary


def _summary(values: list[float | None]) -> dict:
    done = [v for v in values if v is not None]
    return {
        "n": len(values),
        "timeouts": len(values) - len(done),
        "p50_s": round(float(np.percentile(done, 50)), 2) if done else None,
        "p95_s": round(float(np.percentile(done, 95)), 2) if done else None,
        "max_s": round(max(done), 2) if done else None,
    }


def _has(root: WorkspaceRoot, path: str, token: str = "") -> bool:
    """Whether search reads ``path`` of the root (with ``token`` in it): a chunk in its source's active generation."""
    found = Chunk.objects.filter(source__root=root, path=path, generation=F("source__active_generation"))
    if token:
        found = found.filter(content__contains=token)
    return found.exists()


def _wait(done: Callable[[], bool], timeout: float, what: str) -> None:
    wait(done, timeout, what, prefix="freshness")


def _job_request(root_id: int) -> int:
    job, _ = tasks.root_reindex_request(root_id=root_id, ignore_cooldown=True, trigger="bench")
    return job.pk


def _job_done(job_id: int, timeout: float) -> None:
    _wait(lambda: _status(job_id) not in ACTIVE_JOB_STATUSES, timeout, f"index job {job_id}")
    job = IndexJob.objects.get(pk=job_id)
    if job.status != JobStatus.SUCCEEDED:
        raise ApplicationError(f"rag_bench freshness: index job {job_id} {job.status}: {job.message}")


def _status(job_id: int) -> str:
    return IndexJob.objects.values_list("status", flat=True).get(pk=job_id)


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _clean(base: Path) -> None:
    """Leftovers of an interrupted run: its roots, skills and files."""
    Skill.objects.filter(slug__startswith=PREFIX).delete()
    WorkspaceRoot.objects.filter(name__startswith=PREFIX).delete()
    shutil.rmtree(base, ignore_errors=True)


def freshness_table(report: dict) -> list[str]:
    """The report as the other benches print theirs."""
    lines = [f"  {'phase':<8} {'change':<13} {'n':>4} {'p50 s':>7} {'p95 s':>7} {'max s':>7} {'timeouts':>9}"]
    for phase in ("idle", "bulk"):
        for kind, row in report.get(phase, {}).items():
            if not isinstance(row, dict):
                continue
            cells = [f"{row[k]:>7.2f}" if row[k] is not None else f"{'-':>7}" for k in ("p50_s", "p95_s", "max_s")]
            lines.append(f"  {phase:<8} {kind:<13} {row['n']:>4} {' '.join(cells)} {row['timeouts']:>9}")
            if "chunks_embedded" in row:
                lines.append(f"  {'':<8} {'':<13} chunks embedded by these jobs: {row['chunks_embedded']}")
    bulk = report.get("bulk", {})
    if "rounds_with_bulk_running" in bulk:
        lines.append(
            f"  the bulk job ran through {bulk['rounds_with_bulk_running']} of {bulk['edit']['n']} rounds of changes; "
            f"at the end it was {report['bulk_job']['status']} with {report['bulk_job']['chunks_embedded']} chunks "
            "embedded"
        )
    return lines
