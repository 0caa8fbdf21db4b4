"""Server-Sent Events with keep-alives, for a stream whose producer may be silent for long (a slow model).

The events are produced in a thread and written by the response's generator,
which waits on a queue: a silence longer than ``keepalive`` writes a comment
line, so proxies and browsers keep the connection open. When the client goes
away, gunicorn closes the response; its generator's ``finally`` fires the
producer's ``Cancel``, which ends the upstream call (kernel/llm.py shuts its
socket down). The producer touches no database: it runs outside the request's
connection handling.
"""

import json
import logging
import queue
import threading
from collections.abc import Callable, Iterator

from retrieval.answering import AnswerEvent, Cancel

log = logging.getLogger(__name__)

KEEPALIVE = b": keep-alive\n\n"
_END = object()


def sse_event(event: AnswerEvent) -> bytes:
    return f"event: {event.name}\ndata: {json.dumps(event.data, separators=(',', ':'))}\n\n".encode()


def sse_stream(produce: Callable[[Cancel], Iterator[AnswerEvent]], *, keepalive: float) -> Iterator[bytes]:
    """``produce(cancel)``'s events as SSE bytes, with a keep-alive comment after each ``keepalive`` s of silence."""
    events: queue.Queue = queue.Queue()
    cancel = Cancel()

    def run() -> None:
        try:
            for event in produce(cancel):
                if cancel.cancelled:
                    return
                events.put(event)
        except Exception:
            log.exception("a streamed answer failed")
            events.put(AnswerEvent("error", {"kind": "model_unavailable", "message": "the answer failed unexpectedly"}))
            events.put(AnswerEvent("done", {"citations": [], "usage": {}, "dropped_markers": 0, "warnings": []}))
        finally:
            events.put(_END)

    threading.Thread(target=run, name="sse-producer", daemon=True).start()
    try:
        while True:
            try:
                item = events.get(timeout=keepalive)
            except queue.Empty:
                yield KEEPALIVE
                continue
            if item is _END:
                return
            yield sse_event(item)
    finally:
        cancel()  # the client left (or the stream ended): the model's call is closed, not left running
