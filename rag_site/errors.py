from typing import Any


class ApplicationError(Exception):
    """A request or job that cannot be done, with a message meant for people.

    The API answers it with a 4xx JSON body, the page with a readable message,
    a job records it as its failure reason.
    """

    def __init__(self, message: str, *, status: int = 400, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.details = details or {}


def error_headers(response, status: int, details: dict):
    """The headers an error answer owes its client: how to authenticate (401), when to come back (429)."""
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="rag-site"'
    if status == 429 and "retry_after_seconds" in details:
        response["Retry-After"] = str(details["retry_after_seconds"])
    return response
