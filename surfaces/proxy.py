"""The client's address behind the reverse proxy (docker-compose.yml's Caddy).

Behind a proxy every request comes from the proxy's address, so per-address
limits (anonymous rate limit) would put all callers in one bucket. With
RAG_TRUST_PROXY_HEADERS the address the proxy saw, the last entry of
X-Forwarded-For, replaces REMOTE_ADDR. Earlier entries are whatever the
client sent and are never used. One proxy hop is assumed.
"""

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse


class ForwardedClientMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if settings.RAG_TRUST_PROXY_HEADERS:
            forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
            last = forwarded.rsplit(",", 1)[-1].strip()
            if last:
                request.META["REMOTE_ADDR"] = last
        return self.get_response(request)
