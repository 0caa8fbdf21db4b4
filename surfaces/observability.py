"""Every request gets an id (``X-Request-ID``), a count and a duration by route, and one log line.

The id is the client's own when it sent a sane one (a proxy's or an
agent's, so one id follows a call through every hop), else a new one; it is
in the response's header, on every log record of the request
(kernel/logs.py) and in the Celery tasks the request queued
(sources/celery_hooks.py). Metrics label requests by their URL pattern
(``api/v1/index-jobs/<int:job_id>``), never the raw path, so a scanner
cannot grow the series without bound.
"""

import logging
import time

from django.http import HttpRequest, HttpResponse

from kernel import logs, metrics

log = logging.getLogger("rag.requests")

# What a request that matched no URL pattern (a 404, a static file, a refusal before routing) is counted as.
UNROUTED = "<unrouted>"
# Any other method is counted as "other": the label's values stay few whatever clients send.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def request_route(request: HttpRequest) -> str:
    match = getattr(request, "resolver_match", None)
    return (match.route or match.view_name or UNROUTED) if match is not None else UNROUTED


def request_identity(request: HttpRequest) -> str:
    """Who asked, for logs: the API identity's name (a key's prefix, a user name), never a secret.

    Read only when authentication has already run: a log line must not cost a session query of its own.
    """
    name = getattr(getattr(request, "auth", None), "name", None)  # an access.identity.Identity, set by ninja
    if isinstance(name, str) and name:
        return name
    user = getattr(request, "_cached_user", None)  # set once something asked for request.user
    if user is not None and user.is_authenticated:
        return f"user {user.get_username()}"
    return ""


class RequestObservability:
    """First in MIDDLEWARE after the proxy's: every response, refusals included, carries the id."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        request_id = logs.request_id_accept(request.headers.get("X-Request-ID"))
        request.request_id = request_id  # type: ignore[attr-defined]
        with logs.request_context(request_id=request_id):
            response = self.get_response(request)
            seconds = time.perf_counter() - started
            route = request_route(request)
            identity = request_identity(request)
            method = request.method if request.method in METHODS else "other"
            metrics.HTTP_REQUESTS.labels(route=route, method=method, status=str(response.status_code)).inc()
            metrics.HTTP_DURATION.labels(route=route).observe(seconds)
            log.info(
                "%s %s %s %.1f ms",
                method,
                route,
                response.status_code,
                seconds * 1000,
                # Named here too, not only by the handlers' filter: whoever captures this line gets the whole of it.
                extra={
                    "request_id": request_id,
                    "identity": identity,
                    "route": route,
                    "method": method,
                    "status": response.status_code,
                    "duration_ms": round(seconds * 1000, 1),
                },
            )
        response["X-Request-ID"] = request_id
        return response

    def process_view(self, request: HttpRequest, view_func, view_args, view_kwargs) -> None:
        # Records the view logs say which route they belong to.
        logs.context_update(route=request_route(request))
