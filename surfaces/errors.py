"""Every error answered under /api/ and by /mcp's HTTP layer: one JSON shape (``kernel.errors.error_body``) with
the headers it owes: a 401 says how to authenticate and where the protected-resource metadata is, a 429 when to
come back."""

from collections.abc import Mapping, Sequence
from typing import Any

from django.http import HttpRequest, JsonResponse

from kernel.errors import ApplicationError, application_error_body, error_body, error_headers, http_status
from surfaces.protected_resource import bearer_challenge


def error_response(
    request: HttpRequest,
    message: str,
    *,
    status: int,
    errors: Sequence[str] = (),
    data: Mapping[str, Any] | None = None,
) -> JsonResponse:
    return _answered(request, error_body(message, errors=errors, data=data), status=status)


def application_error_response(request: HttpRequest, exc: ApplicationError) -> JsonResponse:
    return _answered(request, application_error_body(exc), status=http_status(exc))


def _answered(request: HttpRequest, body: dict[str, Any], *, status: int) -> JsonResponse:
    # A key that was sent and refused is an invalid token; no credentials at all get no error code (RFC 6750).
    invalid = body["error"] if request.headers.get("Authorization") else None
    challenge = bearer_challenge(request, invalid=invalid)
    return error_headers(JsonResponse(body, status=status), status, body["data"], challenge=challenge)
