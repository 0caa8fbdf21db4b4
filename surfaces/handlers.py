"""Django's error views, answering JSON under /api/ so API callers never parse an HTML page."""

import json
import sys

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.request import RawPostDataException
from django.views import defaults

from kernel.errors import connection_lost
from surfaces.errors import error_response

# A PostgreSQL restart after a crashed backend took 1.6 s in the attack run
# (issue 22): one or two seconds later a fresh connection is likely to work.
DATABASE_RETRY_AFTER_SECONDS = 2
DATABASE_UNAVAILABLE = "the database is unavailable (its connection was lost); try again in a few seconds"
# JSON-RPC 2.0 leaves -32000 to -32099 to the server's own errors.
JSONRPC_SERVER_ERROR = -32000


def _api(request) -> bool:
    return request.path.startswith("/api/")


def bad_request(request, exception=None):
    if not _api(request):
        return defaults.bad_request(request, exception)
    if isinstance(exception, RequestDataTooBig):
        return error_response(request, "the request body is too large", status=413)
    return error_response(request, "bad request", status=400)


def not_found(request, exception=None):
    if not _api(request):
        return defaults.page_not_found(request, exception)
    return error_response(request, f"no such endpoint: {request.method} {request.path} (see /api/docs)", status=404)


def server_error(request):
    # Called while Django handles the exception: a lost database connection
    # outside a view (a middleware, the session) is an outage, not a bug.
    if connection_lost(sys.exc_info()[1] or Exception()):
        return database_unavailable(request)
    if not _api(request):
        return defaults.server_error(request)
    return error_response(request, "internal error; the server log has the details", status=500)


def database_unavailable(request: HttpRequest) -> HttpResponse:
    """503 with Retry-After, in the caller's language: JSON under /api/, a JSON-RPC error on /mcp, text elsewhere."""
    if _api(request):
        response: HttpResponse = error_response(request, DATABASE_UNAVAILABLE, status=503)
    elif request.path.rstrip("/") == "/mcp":
        error = {"code": JSONRPC_SERVER_ERROR, "message": DATABASE_UNAVAILABLE}
        response = JsonResponse({"jsonrpc": "2.0", "id": _jsonrpc_id(request), "error": error}, status=503)
    else:
        response = HttpResponse(
            f"Service unavailable: {DATABASE_UNAVAILABLE}.", status=503, content_type="text/plain; charset=utf-8"
        )
    response["Retry-After"] = str(DATABASE_RETRY_AFTER_SECONDS)
    return response


def _jsonrpc_id(request: HttpRequest) -> str | int | None:
    # The id of the request being answered, when it has a usable one; else null, as JSON-RPC 2.0 answers
    # a request whose id cannot be read.
    try:
        message = json.loads(request.body)
    except (ValueError, RequestDataTooBig, RawPostDataException):
        return None
    value = message.get("id") if isinstance(message, dict) else None
    return value if jsonrpc_id_usable(value) else None


def jsonrpc_id_usable(value: object) -> bool:
    """An id MCP can answer: a string or an integer (JSON-RPC 2.0 allows null and fractions; MCP does not)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
