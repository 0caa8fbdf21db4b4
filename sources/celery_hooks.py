"""Hooks into Celery's worker and beat: heartbeats, the recovery sweep on every broker connection, the request id a
task was queued under, and the metrics of a pool process that exits.

Installed by rag_site/celery.py in every Celery process. Nothing here
imports models at import time: this module loads before Django is set up.
"""

import contextvars
import logging
import threading

from celery import Celery, bootsteps
from celery.signals import (
    after_task_publish,
    beat_init,
    before_task_publish,
    task_postrun,
    task_prerun,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
)

from kernel import heartbeats, logs, metrics

log = logging.getLogger(__name__)


class WorkerHeartbeatStep(bootsteps.StartStopStep):
    """Each worker records that it is alive (read by GET /api/v1/health)."""

    def __init__(self, parent, **kwargs) -> None:
        super().__init__(parent, **kwargs)
        self.heart: heartbeats.WorkerHeartbeat | None = None

    def start(self, worker) -> None:
        self.heart = heartbeats.WorkerHeartbeat(worker.hostname)
        self.heart.start()

    def stop(self, worker) -> None:
        if self.heart is not None:
            self.heart.stop()


class RecoverOnConnectStep(bootsteps.StartStopStep):
    """Run the recovery sweep each time the worker (re)connects to the broker.

    The consumer starts its steps again after a lost connection comes back,
    so this runs at start and right after every broker outage: items that
    waited for the broker are sent at once, not at the next beat tick.
    """

    requires = {"celery.worker.consumer.connection:Connection"}

    def start(self, consumer) -> None:
        # A thread of its own: a slow database must not hold up consuming.
        threading.Thread(target=_sweep, name="rag-recovery", daemon=True).start()


def _sweep() -> None:
    from django.db import connections

    from sources.tasks import recovery_sweep

    try:
        recovery_sweep()
    except Exception:  # noqa: BLE001 - the next connection or beat tick tries again
        log.exception("the recovery sweep failed")
    finally:
        connections.close_all()  # this thread's connections; the task's own are untouched


def _beat_published(sender=None, **kwargs) -> None:
    heartbeats.heartbeat_record(heartbeats.BEAT)


def _beat_started(sender=None, **kwargs) -> None:
    # Only in the beat process: every task it publishes proves it is ticking.
    after_task_publish.connect(_beat_published, weak=False, dispatch_uid="rag_beat_published")


def embedding_warm_up(**_) -> threading.Thread:
    """A worker process loads the default embedding model as it starts, in the background.

    Otherwise the first save after a start (or after a pool child is
    replaced) waits several seconds for the load: measured by `rag_bench
    freshness`, the first watched edit took 10.1 s, the next ones under 1.3 s.
    A task that arrives meanwhile waits for the same load (the loader is
    locked); a model that cannot load is the first task's error, as before.
    """

    def load() -> None:
        from sources.config import embedding_config
        from sources.embedding import EmbeddingError, embedder_for, model_reference

        try:
            config = embedding_config()
            provider, name = model_reference(config.model, backend=config.backend)
            if provider == "local":  # an API model has nothing to load
                embedder_for(provider=provider, name=name, device=config.device).embed(["warm up"])
        except (EmbeddingError, ValueError) as exc:
            log.warning("worker warm-up: the embedding model was not loaded (%s); the first task loads it", exc)

    thread = threading.Thread(target=load, name="embedding-warm-up", daemon=True)
    thread.start()
    return thread


def git_clones_scrub(**_) -> None:
    """Tokens kept in git clones' remote URLs from before issue 39 are removed as a worker starts
    (sources/git.py, ``clone_scrub``); a job of the root does it too."""
    from sources import git_roots
    from sources.config import git_config

    try:
        git_roots.clones_scrub(config=git_config())
    except Exception:  # noqa: BLE001 - never stops a worker from starting; each job of a root scrubs its clone
        log.exception("cleaning the git clones' remote URLs failed")


def request_id_attach(headers: dict | None = None, **_) -> None:
    """A task sent while a request (or a task) runs carries its id in a header: the worker's logs of it show it."""
    request_id = logs.current().request_id
    if request_id and headers is not None:
        headers.setdefault(logs.TASK_HEADER, request_id)


# task id -> the context token task_postrun puts back (a solo or threaded pool runs tasks in one process).
_task_contexts: dict[str, contextvars.Token] = {}


def task_context_enter(task_id: str = "", task=None, **_) -> None:
    request_id = str(getattr(task.request, logs.TASK_HEADER, None) or "") if task is not None else ""
    _task_contexts[task_id] = logs.context_enter(
        request_id=request_id, task_id=task_id, task_name=getattr(task, "name", "")
    )


def task_context_leave(task_id: str = "", **_) -> None:
    token = _task_contexts.pop(task_id, None)
    if token is not None:
        logs.context_leave(token)


def metrics_process_dead(**_) -> None:
    metrics.process_dead()


def hooks_install(app: Celery) -> None:
    app.steps["worker"].add(WorkerHeartbeatStep)
    app.steps["consumer"].add(RecoverOnConnectStep)
    beat_init.connect(_beat_started, weak=False, dispatch_uid="rag_beat_started")
    # Each prefork child (what `make run` starts); the parent runs no task, so it loads nothing.
    worker_process_init.connect(embedding_warm_up, weak=False, dispatch_uid="rag_embedding_warm_up")
    worker_ready.connect(git_clones_scrub, weak=False, dispatch_uid="rag_git_clones_scrub")
    before_task_publish.connect(request_id_attach, weak=False, dispatch_uid="rag_request_id_attach")
    task_prerun.connect(task_context_enter, weak=False, dispatch_uid="rag_task_context_enter")
    task_postrun.connect(task_context_leave, weak=False, dispatch_uid="rag_task_context_leave")
    worker_process_shutdown.connect(metrics_process_dead, weak=False, dispatch_uid="rag_metrics_process_dead")
