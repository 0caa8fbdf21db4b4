"""Celery tasks of the benchmarks only (the product never sends them)."""

import os
import time
from pathlib import Path

from celery import shared_task

from sources.embedding import embedder_for


@shared_task
def bench_warm_task(provider: str, name: str, device: str, barrier: str, expected: int, timeout: float = 300.0) -> int:
    """Load the model in this worker process, then wait until ``expected`` processes have (a file each in
    ``barrier``): a process that waits takes no second warm-up, so each of ``expected`` messages warms another one.
    Returns this process's id."""
    embedder_for(provider=provider, name=name, device=device).embed(["warm up"])
    Path(barrier, str(os.getpid())).touch()
    deadline = time.monotonic() + timeout
    while len(os.listdir(barrier)) < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return os.getpid()
