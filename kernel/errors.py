"""The errors services raise, typed by what went wrong; the edges choose how to say it.

Services and storage never speak HTTP: ``http_status`` below maps each
class to a status for the API and /mcp, a job records the message as its
failure reason, the page shows it.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from django.db import InterfaceError, OperationalError


class ApplicationError(Exception):
    """A request or job that cannot be done, with a message meant for people (a bad request: 400)."""

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class InvalidInput(ApplicationError):
    """Well-formed, but the values cannot be used: a range that is not one, a regex that does not compile (422)."""


class NotFound(ApplicationError):
    """What was asked for does not exist, or the caller may not know that it does: the same answer (404)."""


class Conflict(ApplicationError):
    """The thing is in a state that forbids the request, e.g. a disabled root (409)."""


class Cooldown(ApplicationError):
    """Too soon: a rate limit or a root's cooldown; ``details["retry_after_seconds"]`` says when (429)."""


class Unavailable(ApplicationError):
    """The service cannot answer now (every search channel failed, a root's directory is gone); try later (503)."""


class Unauthenticated(ApplicationError):
    """No valid credentials: a missing, malformed, revoked or expired key (401)."""


class Forbidden(ApplicationError):
    """Valid credentials that may not do this (403)."""


class TooLarge(ApplicationError):
    """The request carries more than a limit allows, e.g. an upload over RAG_EXTRACT_MAX_FILE_MB (413)."""


class UnsupportedType(ApplicationError):
    """A file of a type this service does not read, e.g. an upload with an unknown suffix (415)."""


# How each kind of service error is said in HTTP (the API and /mcp); the most specific class first.
HTTP_STATUSES = (
    (InvalidInput, 422),
    (NotFound, 404),
    (Conflict, 409),
    (Cooldown, 429),
    (Unavailable, 503),
    (Unauthenticated, 401),
    (Forbidden, 403),
    (TooLarge, 413),
    (UnsupportedType, 415),
    (ApplicationError, 400),
)


def http_status(exc: ApplicationError) -> int:
    return next(status for kind, status in HTTP_STATUSES if isinstance(exc, kind))


def error_body(message: str, *, errors: Sequence[str] = (), data: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The one shape of every error answer (the API, /mcp's HTTP refusals, an MCP tool's refusal).

    ``error`` and ``detail``: the message, the same string (``detail`` is where FastAPI's and RFC 9457's clients
    look); ``errors``: one "field: problem" per field at fault, else empty; ``data``: what a client can act on
    (``retry_after_seconds``, ``field``, ``current``), else empty.
    """
    return {"error": message, "detail": message, "errors": list(errors), "data": dict(data or {})}


def application_error_body(exc: ApplicationError) -> dict[str, Any]:
    """``error_body`` of a service error: a field its details name is the field at fault."""
    field = exc.details.get("field")
    errors = []
    if isinstance(field, str) and field:
        errors = [exc.message if exc.message.startswith(f"{field}:") else f"{field}: {exc.message}"]
    return error_body(exc.message, errors=errors, data=exc.details)


BEARER_CHALLENGE = 'Bearer realm="rag-site"'


def error_headers(response, status: int, details: Mapping[str, Any], *, challenge: str = BEARER_CHALLENGE):
    """The headers an error answer owes its client: how to authenticate (401; ``challenge``, the web edge adds
    where the protected-resource metadata is), when to come back (429)."""
    if status == 401:
        response["WWW-Authenticate"] = challenge
    if status == 429 and "retry_after_seconds" in details:
        response["Retry-After"] = str(details["retry_after_seconds"])
    return response


# SQLSTATEs that mean the connection is gone or cannot be made now: class 08
# (connection exception), 57P01-57P03 (terminated by an administrator, a
# crash, a server starting up or shutting down), 53300 (too many
# connections). A statement or lock timeout (57014, 55P03) leaves the
# connection usable: search turns those into a warning or a 503 of its own.
_LOST_SQLSTATES = ("57P01", "57P02", "57P03", "53300")


def connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` means the database connection dropped or could not be opened (a restart, a failover,
    pg_terminate_backend), as opposed to a query that failed on a working connection."""
    if isinstance(exc, InterfaceError):
        return True
    if not isinstance(exc, OperationalError):
        return False
    # psycopg reports a broken socket or a failed connect without a SQLSTATE.
    sqlstate = getattr(exc.__cause__, "sqlstate", None)
    return sqlstate is None or sqlstate.startswith("08") or sqlstate in _LOST_SQLSTATES
