"""One encoder thread per process: a flush's chunks embed while the indexer reads, chunks and writes on.

Embedding is the CPU's work and ONNX Runtime and PyTorch release the GIL
while they compute, so the walk, the chunker and the previous flush's
database writes run beside it instead of after it (issue 30: end-to-end
indexing at least 0.9 of raw encode). The thread only computes vectors: it
reads no database and calls none of the job's callbacks; the indexing
thread hears of each finished batch through a queue and beats the job's
heart itself, so a Django connection is never used from two threads.
"""

import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

T = TypeVar("T")

_executor: tuple[int, ThreadPoolExecutor] | None = None
_lock = threading.Lock()


def _encoder() -> ThreadPoolExecutor:
    """This process's encoder thread; one, so two flushes never embed at once and split the cores between them."""
    global _executor
    with _lock:
        # A forked Celery child inherits the parent's executor object but not its thread: make its own.
        if _executor is None or _executor[0] != os.getpid():
            _executor = (os.getpid(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="rag-encoder"))
        return _executor[1]


class WorkCancelled(Exception):
    """Raised on the encoder thread at a cancelled work's next batch: nobody will read its vectors."""


class BackgroundWork(Generic[T]):
    """``work(report)`` on the encoder thread; ``report(done)`` after each batch reaches ``result``'s caller."""

    def __init__(self, work: Callable[[Callable[[int], None]], T]) -> None:
        self._reports: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._future: Future[T] = _encoder().submit(self._run, work)

    def _run(self, work: Callable[[Callable[[int], None]], T]) -> T:
        def report(done: int) -> None:
            if self._stop.is_set():
                raise WorkCancelled  # out of the model's batch loop: the thread is free for the next job's work
            self._reports.put(done)

        try:
            if self._stop.is_set():
                raise WorkCancelled
            return work(report)
        finally:
            self._reports.put(None)  # wakes result() at once, whatever the work did

    def cancel(self) -> None:
        """Drop the work: not started, it never starts; running, it stops after its current batch.

        A job that stops (cancelled, failed) cancels the work it started: the one encoder thread would otherwise
        compute vectors nobody reads while the process's next job waits behind them.
        """
        self._stop.set()
        self._future.cancel()

    def result(self, on_report: Callable[[int], None] | None = None) -> T:
        """Wait for the work, calling ``on_report`` on this thread for every batch it reported; its error is
        raised here."""
        while (done := self._reports.get()) is not None:
            if on_report is not None:
                on_report(done)
        return self._future.result()
