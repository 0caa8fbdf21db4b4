"""The errors services raise, typed by what went wrong; the edges choose how to say it.

Services and storage never speak HTTP: ``http_status`` below maps each
class to a status for the API and /mcp, a job records the message as its
failure reason, the page shows it.
"""

from typing import Any


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


# How each kind of service error is said in HTTP (the API and /mcp); the most specific class first.
HTTP_STATUSES = ((InvalidInput, 422), (NotFound, 404), (Conflict, 409), (Cooldown, 429), (Unavailable, 503),
                 (Unauthenticated, 401), (Forbidden, 403), (ApplicationError, 400))


def http_status(exc: ApplicationError) -> int:
    return next(status for kind, status in HTTP_STATUSES if isinstance(exc, kind))


def error_headers(response, status: int, details: dict):
    """The headers an error answer owes its client: how to authenticate (401), when to come back (429)."""
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="rag-site"'
    if status == 429 and "retry_after_seconds" in details:
        response["Retry-After"] = str(details["retry_after_seconds"])
    return response
