"""Refused callers are rate-limited by address: 401s and 403s under /api/, on /mcp and on /metrics.

Every 401 (no key, a bad, unknown, revoked or expired key) and 403 (a
forbidden widening of the scope, a missing permission, a foreign Origin)
counts against the client's address, as surfaces/proxy.py decides it, in a
sliding one-minute window. Once the address has RAG_AUTH_FAILURES_PER_MINUTE
of them in the last 60 seconds, its requests get 429 with Retry-After until
the oldest is a minute old, before any key is looked at: a good key sent
from the same address waits too, or guessing could go on behind one.

Counted here, by the answer's status, so a refusal counts whichever layer
made it (ninja's auth classes, the scope rule, /mcp's own checks). A tool
call refused inside a JSON-RPC result (HTTP 200) is an answer, not a
refusal of the caller, and does not count.

``/metrics`` counts too: its token is the operator's choice, not 192 random
bits, so guesses must not go on without limit. ``/api/v1/health`` is never
answered 429 (a load balancer would take the node out of rotation for what
one address did); a bad key sent to it still counts against the address.

With Redis down the limit is not applied, as the request rate limit is not
(access/ratelimit.py): a key has 192 random bits, so this limit is about
load, not secrecy, and the API must outlive its broker. Sign-in, where the
secret is a password, fails closed instead (access/signin.py).
"""

import json
import logging
from collections.abc import Callable

import redis
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse

from access.ratelimit import rate_limit_count, rate_limit_peek
from kernel.errors import Cooldown, application_error_body, error_headers

log = logging.getLogger(__name__)

REFUSED = frozenset({401, 403})
MCP_PATHS = frozenset({"/mcp", "/mcp/"})
METRICS_PATH = "/metrics"
# Load balancers' probe (surfaces/routes/sources.py): answered whatever the address did.
HEALTH_PATH = "/api/v1/health"
# JSON-RPC leaves -32000..-32099 to the server; this one reads as "429".
JSONRPC_TOO_MANY = -32029


class RefusalLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path_info
        on_mcp = path in MCP_PATHS
        limit = settings.RAG_AUTH_FAILURES_PER_MINUTE
        if limit <= 0 or not (on_mcp or path.startswith("/api/") or path == METRICS_PATH):
            return self.get_response(request)
        bucket = f"refused:{request.META.get('REMOTE_ADDR', '')}"
        if path.rstrip("/") != HEALTH_PATH:
            try:
                rate_limit_peek(
                    bucket=bucket,
                    limit=limit,
                    message=f"too many refused requests from your address ({limit} answers 401 or 403 per minute)",
                )
            except Cooldown as exc:
                return _jsonrpc_too_many(request, exc) if on_mcp else _too_many(exc)
        response = self.get_response(request)
        if response.status_code in REFUSED:
            try:
                rate_limit_count(bucket=bucket)
            except redis.RedisError as exc:
                log.warning("refusal not counted (Redis unreachable): %s", exc)
        return response


def _too_many(exc: Cooldown) -> JsonResponse:
    """The API's error shape (kernel.errors.error_body)."""
    return error_headers(JsonResponse(application_error_body(exc), status=429), 429, exc.details)


def _jsonrpc_too_many(request: HttpRequest, exc: Cooldown) -> JsonResponse:
    """A JSON-RPC error response, answering the request's id when it can be read (else null, as the spec says)."""
    body = {
        "jsonrpc": "2.0",
        "id": _jsonrpc_id(request),
        "error": {"code": JSONRPC_TOO_MANY, "message": exc.message, "data": {"status": 429, **exc.details}},
    }
    return error_headers(JsonResponse(body, status=429), 429, exc.details)


def _jsonrpc_id(request: HttpRequest) -> str | int | None:
    try:
        message = json.loads(request.body)
    except (RequestDataTooBig, ValueError):
        return None
    message_id = message.get("id") if isinstance(message, dict) else None
    # A bool is an int to Python, not an id to JSON-RPC.
    return message_id if isinstance(message_id, str | int) and not isinstance(message_id, bool) else None
