"""Log records that say which request they belong to, as text or as JSON lines (RAG_LOG_FORMAT).

A request's id (``X-Request-ID``), who made it and its route live in a
context variable for as long as the request (surfaces/observability.py) or
a task it queued (sources/celery_hooks.py carries the id in the task's
headers) runs. ``ContextFilter`` copies them onto every record; the
formatters print them. Nothing here reads settings: the settings' LOGGING
names these classes.
"""

import contextvars
import json
import logging
import re
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime

# A client's own id is kept when it looks like one (a UUID, a proxy's hex or base64 id); anything else (too long,
# spaces, quotes, control characters a log reader would trip on) is replaced by a new one.
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:/+=-]{1,128}")
# The Celery task header that carries the id from the request to the task it queued.
TASK_HEADER = "rag_request_id"


@dataclass(frozen=True, slots=True)
class RequestContext:
    request_id: str = ""
    identity: str = ""  # "API key 1a2b3c4d", "user alice", "anonymous": never a secret
    route: str = ""
    task_id: str = ""  # in a Celery task (sources/celery_hooks.py)
    task_name: str = ""


_CONTEXT_FIELDS = ("request_id", "identity", "route", "task_id", "task_name")
_context: contextvars.ContextVar[RequestContext] = contextvars.ContextVar("rag_request", default=RequestContext())  # noqa: B039 - frozen


def request_id_accept(incoming: str | None) -> str:
    """The client's ``X-Request-ID`` when it is a sane token, else a new random one."""
    if incoming and _REQUEST_ID.fullmatch(incoming):
        return incoming
    return uuid.uuid4().hex


def current() -> RequestContext:
    return _context.get()


@contextmanager
def request_context(**fields: str):
    """Records logged inside carry ``fields`` (request_id, identity, route), on this thread only."""
    token = _context.set(RequestContext(**fields))
    try:
        yield
    finally:
        _context.reset(token)


def context_enter(**fields: str) -> contextvars.Token:
    """Like ``request_context``, for hooks that start and end in two calls (a Celery task's prerun and postrun)."""
    return _context.set(RequestContext(**fields))


def context_leave(token: contextvars.Token) -> None:
    _context.reset(token)


def context_update(**fields: str) -> None:
    """Add what was learnt during the request (its route once resolved, who it turned out to be)."""
    _context.set(replace(_context.get(), **fields))


class ContextFilter(logging.Filter):
    """Copies the request's context onto each record (never drops one); set on the handlers."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = _context.get()
        for name in _CONTEXT_FIELDS:
            if not getattr(record, name, ""):
                setattr(record, name, getattr(context, name))
        return True


# Fields a request's own line adds (surfaces/observability.py logs it with extra=...).
_EXTRA_FIELDS = ("method", "status", "duration_ms")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, and the request's fields when set."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in (*_CONTEXT_FIELDS, *_EXTRA_FIELDS):
            value = getattr(record, name, None)
            if value not in (None, ""):
                line[name] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """The plain line, with ``request_id=...`` appended when the record belongs to a request or its task."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        request_id = getattr(record, "request_id", "")
        return f"{text} request_id={request_id}" if request_id else text


class RequestIdSuffix(logging.Formatter):
    """Another formatter's line (Celery's, which names the task) with ``request_id=...`` appended when set."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        text = self.inner.format(record)
        request_id = getattr(record, "request_id", "")
        return f"{text} request_id={request_id}" if request_id else text


def handlers_format(logger: logging.Logger, *, log_format: str) -> None:
    """Give ``logger``'s handlers the context filter and the format (Celery set them up with its own)."""
    for handler in logger.handlers:
        if not any(isinstance(f, ContextFilter) for f in handler.filters):
            handler.addFilter(ContextFilter())
        if log_format == "json":
            handler.setFormatter(JsonFormatter())
        elif not isinstance(handler.formatter, RequestIdSuffix):
            handler.setFormatter(RequestIdSuffix(handler.formatter or logging.Formatter()))
