"""Input that no view can use is refused at the door, with a clear 400; a lost database connection is retried
for requests that only read, and otherwise answered 503 with Retry-After."""

import functools
import logging
from collections.abc import Callable

from django.db import connections
from django.http import HttpRequest, HttpResponse

from kernel.errors import connection_lost
from kernel.replicas import replica_lost, replica_reads
from kernel.text import control_characters_message
from surfaces.errors import error_response
from surfaces.handlers import database_unavailable

log = logging.getLogger(__name__)


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
            return error_response(request, problem, status=400)
        return HttpResponse(problem, status=400, content_type="text/plain; charset=utf-8")


class JsonMethodNotAllowed:
    """A method a route under /api/ does not take (``GET /api/v1/search``): django-ninja answers a plain-text 405;
    this turns it into the API's JSON error, naming the methods the route takes, its Allow header kept."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            response.status_code != 405
            or not request.path.startswith("/api/")
            or response.get("Content-Type", "").startswith("application/json")
        ):
            return response
        allowed = ", ".join(sorted(m.strip() for m in response.get("Allow", "").split(",") if m.strip()))
        refused = error_response(
            request, f"{request.method} is not allowed on {request.path}: it takes {allowed or 'no method'}", status=405
        )
        refused["Allow"] = allowed
        return refused


# GET and HEAD only read (Django's own rule for safe methods); a POST that
# only reads says so with @read_only.
_READ_METHODS = ("GET", "HEAD")


def read_only(view: Callable) -> Callable:
    """Declare a view safe to run again after a lost database connection: it writes nothing a second run would
    repeat (search, context, the MCP tools). On django-ninja operations: ``@decorate_view(read_only)``.

    The view also reads the corpus from a read replica, when one is configured and healthy (kernel/replicas.py).
    """

    @functools.wraps(view)
    def marked(request: HttpRequest, *args, **kwargs):
        request.database_read_only = True  # type: ignore[attr-defined]
        with replica_reads():
            return view(request, *args, **kwargs)

    return marked


class ReplicaReads:
    """GET and HEAD requests read the corpus from a read replica (kernel/replicas.py), except in the admin, which
    shows its own writes at once. Before RetryLostConnection, so a request run again after a replica dropped stays
    inside the block, on the primary or another replica."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method not in _READ_METHODS or request.path.startswith("/admin/"):
            return self.get_response(request)
        with replica_reads():
            return self.get_response(request)


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
        replica_lost()
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
