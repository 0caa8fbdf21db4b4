"""The watcher as `make run` runs it: a supervised `manage.py rag_watch` beside a real Celery worker.

A watched edit becomes searchable without anyone asking; the watcher killed
with SIGKILL is started again by the supervisor; what changed while it was
down is caught by the next periodic re-verify (the safety net).
"""

import os
import signal
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from rag_site.healthcheck import watch_check
from rag_site.supervisor import Supervisor
from sources import tasks
from sources.models import Chunk, IndexJob, WorkspaceRoot
from tests.conftest import ROOT, index_root, running_worker, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow]


def watcher_env() -> dict[str, str]:
    """The watcher's environment: the test database and the base directories this test set (as the worker's)."""
    database = connection.settings_dict["NAME"]
    return {
        **os.environ,
        "DATABASE_URL": os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/" + database,
        "RAG_ROOT_BASE_DIRS": ",".join(settings.RAG_ROOT_BASE_DIRS),
        "LOG_LEVEL": "INFO",
    }


def stored(root: WorkspaceRoot, path: str, text: str) -> bool:
    return Chunk.objects.filter(source__root=root, path=path, content__contains=text).exists()


def test_a_killed_watcher_is_restarted_and_the_re_verify_catches_what_it_missed(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    directory = tmp_path / "repo"
    directory.mkdir()
    (directory / "app.py").write_text("def app():\n    return 'first'\n")
    (directory / "other.py").write_text("def other():\n    return 'first'\n")
    root = WorkspaceRoot.objects.create(name="repo", path=str(directory), cooldown_seconds=0)
    index_root(root)
    supervisor = Supervisor(log_dir=tmp_path / "log", first_delay=0.5)
    log = supervisor.log_path("watcher")

    def watching(times: int) -> bool:
        supervisor.check()
        return log.exists() and log.read_text().count("watching 1 root(s)") >= times

    with running_worker("watch-worker"):
        try:
            first = supervisor.start(
                "watcher", [sys.executable, str(Path(ROOT) / "manage.py"), "rag_watch"], env=watcher_env()
            )
            wait_for(lambda: watching(1), what="the watcher to watch the root")
            assert watch_check(var_dir=Path(os.environ["RAG_VAR_DIR"])) is None  # compose's health check

            (directory / "app.py").write_text("def app():\n    return 'edited while watched'\n")
            wait_for(lambda: stored(root, "app.py", "edited while watched"), what="the watched edit in search")
            assert IndexJob.objects.filter(root=root, trigger="watch").exclude(paths=[]).exists()

            os.kill(first.pid, signal.SIGKILL)
            first.wait(timeout=30)
            (directory / "missed.py").write_text("def missed():\n    return 'written while nobody watched'\n")
            wait_for(lambda: watching(2), what="the supervisor to start the watcher again")
            assert supervisor.children["watcher"].process.pid != first.pid
            assert supervisor.children["watcher"].restarts == 1

            (directory / "other.py").write_text("def other():\n    return 'edited after the restart'\n")
            wait_for(lambda: stored(root, "other.py", "edited after the restart"), what="the watcher back at work")
            assert not Chunk.objects.filter(source__root=root, path="missed.py").exists()  # its event was lost

            tasks.root_reverify_task(root.pk)  # what beat runs on the root's schedule
            wait_for(lambda: stored(root, "missed.py", "written while nobody watched"), what="the re-verify")
        finally:
            supervisor.stop_all(timeout=10)
