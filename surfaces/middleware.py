"""Input that no view can use is refused at the door, with a clear 400; a lost database connection is retried
for requests that only read, and otherwise answered 503 with Retry-After."""

import functools
import logging
import re
from collections.abc import Callable

from django.db import connections
from django.http import HttpRequest, HttpResponse, JsonResponse

from kernel.errors import connection_lost
from surfaces.handlers import database_unavailable

log = logging.getLogger(__name__)

# NUL and the other C0 control characters (and DEL); tab, newline and carriage
# return are text. PostgreSQL refuses NUL in text, so without this a NUL in
# a URL became a 500 naming the database.
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def control_characters_message(value: str, where: str) -> str | None:
    """Why ``value`` is refused, or None when it holds no control character."""
    found = CONTROL.search(value)
    if found is None:
        return None
    return (
        f"{where} contains a control character (U+{ord(found.group()):04X}); NUL and control characters are not allowed"
    )


class RefuseControlCharacters:
    """A NUL or control character in the path or the query string: 400 (JSON under /api/).

    JSON bodies are checked by the API schemas' text type (retrieval/schemas.py);
    form fields by Django's forms (ProhibitNullCharactersValidator).
    """

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        problem = control_characters_message(request.path, "the URL path")
        for name, values in request.GET.lists():
            if problem:
                break
            problem = control_characters_message(name, "a query-string parameter name") or next(
                (m for v in values if (m := control_characters_message(v, f"query-string parameter {name!r}"))), None
            )
        if problem is None:
            return self.get_response(request)
        if request.path.startswith("/api/"):
            return JsonResponse({"error": problem, "detail": []}, status=400)
        return HttpResponse(problem, status=400, content_type="text/plain; charset=utf-8")


# GET and HEAD only read (Django's own rule for safe methods); a POST that
# only reads says so with @read_only.
_READ_METHODS = ("GET", "HEAD")


def read_only(view: Callable) -> Callable:
    """Declare a view safe to run again after a lost database connection: it writes nothing a second run would
    repeat (search, context, the MCP tools). On django-ninja operations: ``@decorate_view(read_only)``."""

    @functools.wraps(view)
    def marked(request: HttpRequest, *args, **kwargs):
        request.database_read_only = True  # type: ignore[attr-defined]
        return view(request, *args, **kwargs)

    return marked


class RetryLostConnection:
    """A view that lost its database connection (pg_terminate_backend, a failover, a restarted PostgreSQL):
    a read is run once more on a fresh connection; a write, or a second loss, answers 503 with Retry-After.

    A write is never repeated: whether its transaction committed before the
    connection dropped is unknown, so the client decides. The connection is
    replaced either way, so the worker's next request does not fail on it too.
    A loss outside any view reaches surfaces.handlers.server_error, which
    answers the same 503. Last in MIDDLEWARE: its process_exception runs first.
    """

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not connection_lost(exception):
            return None
        in_transaction = _drop_lost_connections()
        repeatable = request.method in _READ_METHODS or getattr(request, "database_read_only", False)
        if not repeatable or in_transaction:
            return _unavailable(request, exception)
        log.warning(
            "database connection lost during %s %s (%s): running it again on a fresh connection",
            request.method,
            request.path,
            type(exception).__name__,
        )
        match = request.resolver_match
        if match is None:  # only a view's exceptions come here, after the URL resolved; never repeat blind
            return _unavailable(request, exception)
        try:
            response = match.func(request, *match.args, **match.kwargs)
            # Django renders a template response after the view: a loss while rendering is this request's too.
            render = getattr(response, "render", None)
            return render() if callable(render) else response
        except Exception as again:
            if not connection_lost(again):
                raise
            _drop_lost_connections()
            return _unavailable(request, again)


def _unavailable(request: HttpRequest, exception: Exception) -> HttpResponse:
    # The reason without a traceback: a restart fails every request at once, and the cause is the database's.
    reason = next(iter(str(exception).strip().splitlines()), type(exception).__name__)
    log.error("database connection lost during %s %s: answered 503 (%s)", request.method, request.path, reason)
    return database_unavailable(request)


def _drop_lost_connections() -> bool:
    """Close this thread's connections that no longer answer, so the next query opens a fresh one; whether one
    is still inside a transaction (then nothing may be run again in it)."""
    in_transaction = False
    for conn in connections.all(initialized_only=True):
        if conn.in_atomic_block:
            in_transaction = True
        elif conn.connection is not None and not conn.is_usable():
            conn.close()
    return in_transaction
