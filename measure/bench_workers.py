"""The workers a bench measures through, started as `make run` starts them: one per queue (and the watcher), as
supervised children on this checkout's database, with a broker of the bench's own when none is configured."""

import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from django.conf import settings

from kernel.errors import ApplicationError
from rag_site.celery import app
from rag_site.embedded import Broker
from rag_site.management.commands.rag_run import worker_command
from rag_site.supervisor import Supervisor
from sources.queues import BULK, INTERACTIVE

POLL_SECONDS = 0.05


@contextmanager
def workers_started(
    prefix: str, *, env: dict[str, str], concurrency: int, watcher: bool = False
) -> Iterator[Supervisor]:
    """A bulk worker of ``concurrency`` processes and an interactive one (and the watcher), up until the block ends.

    ``env``: what the children get besides this process's environment (e.g. RAG_ROOT_BASE_DIRS).
    """
    env = {**os.environ, **env}
    broker = None
    if not settings.REDIS_URL:
        # No `make run` to join: a Valkey of the bench's own, as make run would start.
        broker = Broker(Path(settings.VAR_DIR) / f"{prefix}-valkey")
        env["REDIS_URL"] = broker.start()
        app.conf.broker_url = env["REDIS_URL"]
    supervisor = Supervisor(log_dir=Path(settings.VAR_DIR) / "log" / prefix)
    python = sys.executable
    hostname = f"{prefix}-{uuid.uuid4().hex[:6]}"
    try:
        # One worker per queue, as make run starts them: saves and watched changes never wait behind a bulk job.
        for queue, processes in ((BULK, concurrency), (INTERACTIVE, 1)):
            command = worker_command(python=python, queue=queue, concurrency=processes)
            command = [arg for arg in command if not arg.startswith("--hostname=")]
            command += ["--without-gossip", "--without-mingle", f"--hostname={hostname}-{queue}@%h"]
            supervisor.start(f"worker-{queue}", command, env=env)
        if watcher:
            supervisor.start("watcher", [python, str(Path(settings.BASE_DIR) / "manage.py"), "rag_watch"], env=env)
        for queue in (BULK, INTERACTIVE):
            wait(partial(_worker_up, f"{hostname}-{queue}", supervisor), 180, f"the {queue} worker", prefix=prefix)
        yield supervisor
    finally:
        supervisor.stop_all(timeout=30)
        if broker is not None:
            broker.stop()


def until(done: Callable[[], bool], timeout: float) -> float | None:
    """Seconds until ``done()`` holds, polled every POLL_SECONDS; None past ``timeout``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if done():
            return time.monotonic() - start
        time.sleep(POLL_SECONDS)
    return None


def wait(done: Callable[[], bool], timeout: float, what: str, *, prefix: str) -> None:
    if until(done, timeout) is None:
        raise ApplicationError(f"rag_bench {prefix}: timed out after {timeout:.0f} s waiting for {what}")


def _worker_up(hostname: str, supervisor: Supervisor) -> bool:
    for line in supervisor.check():
        raise ApplicationError(f"rag_bench: {line}")
    return any(host.startswith(f"{hostname}@") for reply in app.control.ping(timeout=1.0) for host in reply)
