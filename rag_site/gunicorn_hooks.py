"""gunicorn's server hooks (``--config=python:rag_site.gunicorn_hooks``, under `make run` and compose)."""

from kernel import metrics

# Access lines with no credential in them: no Basic user name, no ?token= (rag_site/gunicorn_logging.py).
logger_class = "rag_site.gunicorn_logging.RedactingLogger"


def child_exit(server, worker) -> None:
    """A web worker exited (a restart, max-requests, a crash): its live metrics go, its counts stay summed."""
    metrics.process_dead(worker.pid)
