"""``/mcp``: the MCP server's Streamable HTTP transport, served by a Django view under WSGI.

The product runs gunicorn's threaded WSGI workers, and the SDK's transport
is an ASGI application. The view authenticates the API key as the API does
(401 with ``WWW-Authenticate`` naming the protected-resource metadata,
surfaces/protected_resource.py; 429 with ``Retry-After``), then hands the
request to ``StreamableHTTPSessionManager.handle_request`` through asgiref:
a synthesized ASGI scope, a ``receive`` that returns the body already read,
a ``send`` that collects status, headers and body into an HttpResponse.

Stateless and JSON-response mode: every POST stands alone (no
``Mcp-Session-Id``, nothing kept between requests, so any worker can answer
any request) and is answered with one JSON body, never an open SSE stream
that would hold a WSGI thread. A session manager's ``run()`` may be entered
once, so each request gets a fresh manager around the one ``Server``.

GET (the server-to-client SSE stream) and DELETE (ending a session) have
nothing to serve without sessions: 405 with ``Allow: POST``, as the spec
allows. A body over DATA_UPLOAD_MAX_MEMORY_SIZE is refused (413) before the
SDK sees it; the SDK's own limit is set to the same size.

DNS rebinding (the spec: servers MUST validate ``Origin``): a request that
carries an ``Origin`` header comes from a browser, and is served only when
that origin's host is in ALLOWED_HOSTS (Django's own matching, ``.example.com``
and ``*`` included) or the origin is in CSRF_TRUSTED_ORIGINS; any other
answers 403 before the key is even looked at. Requests without ``Origin``
(agents, command-line clients) are not browsers and pass.

A failure inside the bridge (the SDK, asgiref) is logged with its traceback
and answered with a JSON 500 (the API's error shape, kernel.errors.error_body), never
Django's HTML error page.

A message whose ``id`` is not a string or an integer is answered here with
a JSON-RPC invalid-request error (id null): the SDK would take it for a
notification and never answer. A lost database
connection (in the key check or inside a tool) is raised out of the view
and the request runs again once on a fresh connection, else a JSON-RPC 503
(surfaces.middleware.RetryLostConnection); a call of a tool that writes
(remember, forget) is never run again: it answers 503 and the client decides.
"""

import json
import logging
from collections.abc import MutableMapping
from contextlib import nullcontext
from typing import Any
from urllib.parse import urlsplit

import anyio
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.request import validate_host
from django.utils.http import is_same_domain
from django.views.decorators.csrf import csrf_exempt
from mcp.server.streamable_http_manager import DEFAULT_MAX_REQUEST_BODY_SIZE, StreamableHTTPSessionManager
from mcp.types import INVALID_REQUEST

from access.auth import ApiKeyAuth
from access.identity import Identity
from kernel.errors import ApplicationError, Unauthenticated, error_body
from kernel.replicas import primary_reads
from surfaces.errors import application_error_response, error_response
from surfaces.handlers import jsonrpc_id_usable
from surfaces.mcp import CALLER, LOST_CONNECTION, mcp_server, tool_writes
from surfaces.middleware import read_only

log = logging.getLogger(__name__)

# Never copied into the ASGI scope: the key stays with the view that checked it.
_PRIVATE_HEADERS = {"authorization", "cookie"}
# What Django's request.get_host() allows under DEBUG with an empty ALLOWED_HOSTS.
_DEBUG_HOSTS = [".localhost", "127.0.0.1", "[::1]"]
INTERNAL_ERROR = "internal error: the server log has the details"
_auth = ApiKeyAuth()


@csrf_exempt  # a Bearer key, never a cookie, authenticates here
@read_only  # after a lost database connection the request is run again, unless it calls a tool that writes
def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    """The MCP server (Streamable HTTP, stateless, JSON responses); POST only."""
    if request.method != "POST":
        # Stateless: no session to resume (GET) or end (DELETE).
        refused = error_response(
            request,
            f"{request.method} is not served here: send JSON-RPC messages with POST "
            "(stateless server: no SSE stream, no sessions)",
            status=405,
        )
        refused["Allow"] = "POST"
        return refused
    origin = request.headers.get("Origin")
    if origin is not None and not origin_allowed(origin):
        return error_response(
            request,
            f"Origin {origin!r} is not allowed: a browser may call /mcp only from a host in ALLOWED_HOSTS "
            "or an origin in CSRF_TRUSTED_ORIGINS (DNS-rebinding protection)",
            status=403,
            data={"field": "Origin"},
        )
    try:
        identity = _authenticated(request)
        body = request.body
    except ApplicationError as exc:
        return application_error_response(request, exc)
    except RequestDataTooBig:
        return error_response(request, "the request body is too large", status=413)
    writing = writes(body)
    if writing:
        request.database_read_only = False  # type: ignore[attr-defined]  # remember or forget: never twice
    problem = invalid_id(body)
    if problem is not None:
        # Answered here: the SDK reads a message with such an id as a notification (202, no answer ever).
        error = {"code": INVALID_REQUEST, "message": f"Invalid Request: {problem}"}
        return JsonResponse({"jsonrpc": "2.0", "id": None, "error": error}, status=400)
    lost: list[BaseException] = []
    token, lost_token = CALLER.set(identity), LOST_CONNECTION.set(lost)
    try:
        # A tool that writes reads its own rows back (a memory's chunk, its links) from the primary, not a replica.
        with primary_reads() if writing else nullcontext():
            status, headers, content = async_to_sync(_served)(_scope(request), body)
    finally:
        CALLER.reset(token)
        LOST_CONNECTION.reset(lost_token)
    if lost:
        raise lost[0]
    response = HttpResponse(content, status=status)
    for name, value in headers:
        if name.lower() != "content-length":  # Django sets its own, for the body it sends
            response[name] = value
    return response


def writes(body: bytes) -> bool:
    """Whether the message calls a tool that writes (a body that is not a JSON object is left to the SDK)."""
    try:
        message = json.loads(body)
    except ValueError:
        return False
    params = message.get("params") if isinstance(message, dict) else None
    return (
        isinstance(params, dict)
        and message.get("method") == "tools/call"
        and isinstance(params.get("name"), str)
        and tool_writes(params["name"])
    )


def invalid_id(body: bytes) -> str | None:
    """Why a JSON-RPC message's ``id`` cannot be answered, or None: MCP wants a string or an integer (never null);
    a message without an id is a notification. A body that is not JSON is left to the SDK (a parse error)."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or "id" not in message:
        return None
    value = message["id"]
    if jsonrpc_id_usable(value):
        return None
    kind = (
        "null"
        if value is None
        else {dict: "an object", list: "an array", bool: "a boolean"}.get(type(value), "a fraction")
    )
    return f"id must be a string or an integer, not {kind}"


def origin_allowed(origin: str) -> bool:
    """Whether a browser at ``origin`` may call: its host is in ALLOWED_HOSTS, or it is in CSRF_TRUSTED_ORIGINS."""
    try:
        parsed = urlsplit(origin)
        hostname = parsed.hostname  # lowercased, without port and brackets; None for "null"
    except ValueError:
        return False
    if parsed.scheme not in ("http", "https") or not hostname:
        return False
    if origin in settings.CSRF_TRUSTED_ORIGINS or any(
        # "https://*.example.com", read as Django's CSRF check reads it.
        "*" in trusted
        and urlsplit(trusted).scheme == parsed.scheme
        and is_same_domain(parsed.netloc, urlsplit(trusted).netloc.lstrip("*"))
        for trusted in settings.CSRF_TRUSTED_ORIGINS
    ):
        return True
    allowed = settings.ALLOWED_HOSTS or (_DEBUG_HOSTS if settings.DEBUG else [])
    # ALLOWED_HOSTS writes an IPv6 address in brackets, as the Host header does.
    return validate_host(f"[{hostname}]" if ":" in hostname else hostname, allowed)


def _authenticated(request: HttpRequest) -> Identity:
    identity = _auth(request)  # parses "Bearer <key>", checks the key, counts the rate limit
    if identity is None:
        raise Unauthenticated(
            "authentication required: send 'Authorization: Bearer <API key>' (manage.py rag_apikey create)"
        )
    return identity


def _scope(request: HttpRequest) -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": request.META.get("SERVER_PROTOCOL", "HTTP/1.1").partition("/")[2] or "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode(),
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "root_path": "",
        # WSGI hands header values over as latin-1 strings: encoding them back is lossless.
        "headers": [
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in request.headers.items()
            if name.lower() not in _PRIVATE_HEADERS
        ],
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
        "server": (request.META.get("SERVER_NAME", ""), int(request.META.get("SERVER_PORT") or 80)),
    }


async def _served(scope: dict, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
    """Run one request through a fresh stateless session manager; the response's status, headers and body."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE or DEFAULT_MAX_REQUEST_BODY_SIZE
    manager = StreamableHTTPSessionManager(
        app=mcp_server(), json_response=True, stateless=True, max_request_body_size=limit
    )
    status, headers, content = 500, [], bytearray()
    request_sent, response_done = False, anyio.Event()

    async def receive() -> dict:
        nonlocal request_sent
        if not request_sent:
            request_sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        # Asked again: a server waiting for the client to go away, which it does once the response is complete.
        await response_done.wait()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status = message["status"]
            headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in message.get("headers", [])]
        elif message["type"] == "http.response.body":
            content.extend(message.get("body", b""))
            if not message.get("more_body", False):
                response_done.set()

    try:
        async with manager.run():
            await manager.handle_request(scope, receive, send)
    except Exception:  # anyio raises task failures as an ExceptionGroup: an Exception too
        log.exception("MCP request failed in the transport")
        return _internal_error()
    if not response_done.is_set():
        log.error("MCP transport returned without a complete response (status %s, %d bytes)", status, len(content))
        return _internal_error()
    return status, headers, bytes(content)


def _internal_error() -> tuple[int, list[tuple[str, str]], bytes]:
    # Whatever the SDK had started to answer is dropped: one whole JSON body, no traceback.
    return 500, [("Content-Type", "application/json")], json.dumps(error_body(INTERNAL_ERROR)).encode()
