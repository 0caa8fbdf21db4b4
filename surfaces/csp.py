"""The Content-Security-Policy header on every response: only this site's scripts, styles, images and connections.

Pages keep no inline script (scripts are static files) and no style attribute
(classes in static/css). The one inline <style> (the highlighted code's
colours, built from Pygments at run time) carries a per-response nonce, which
the header names only when a page used it. The policy's shape follows Django
6.0's SECURE_CSP (a dict of directive -> sources, a NONCE placeholder), so
moving to Django's own middleware later is a settings change.
"""

import re
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:  # rag_site/settings/base.py imports this module: nothing here may need configured settings
    from django.http import HttpRequest, HttpResponse

SELF = "'self'"
NONE = "'none'"
# Replaced by 'nonce-<value>' when the response used the nonce, dropped otherwise.
NONCE = "<nonce>"

DEFAULT_POLICY: dict[str, list[str]] = {
    "default-src": [SELF],
    "script-src": [SELF],
    "style-src": [SELF, NONCE],
    # data: images: Swagger UI's stylesheet draws its icons (the servers list's arrow) as data: SVGs. An image
    # cannot run script, and a data: URL fetches nothing, so this admits no code and no tracking.
    "img-src": [SELF, "data:"],
    "object-src": [NONE],
    "base-uri": [SELF],
    "frame-ancestors": [NONE],
    "form-action": [SELF],
}

# Directives that fall back to default-src when absent (CSP Level 3): an extra
# source for one of them starts from default-src's list, or adding a CDN to
# img-src would silently drop the site's own images.
_FETCH = {
    "child-src",
    "connect-src",
    "font-src",
    "frame-src",
    "img-src",
    "manifest-src",
    "media-src",
    "object-src",
    "script-src",
    "style-src",
    "worker-src",
}
# The -elem and -attr forms fall back to their parent first.
_PARENT = {
    "script-src-elem": "script-src",
    "script-src-attr": "script-src",
    "style-src-elem": "style-src",
    "style-src-attr": "style-src",
}
_OTHER = {"default-src", "base-uri", "form-action", "frame-ancestors", "report-uri", "report-to"}
DIRECTIVES = _FETCH | set(_PARENT) | _OTHER

_KEYWORDS = {
    "self",
    "none",
    "unsafe-inline",
    "unsafe-eval",
    "unsafe-hashes",
    "strict-dynamic",
    "report-sample",
    "wasm-unsafe-eval",
}
_NONCE_OR_HASH = re.compile(r"'(?:nonce|sha256|sha384|sha512)-[A-Za-z0-9+/_=-]+'")


def policy_build(*, extra: str) -> dict[str, list[str]]:
    """The default policy plus RAG_CSP_EXTRA (``directive source ...; directive source ...``, CSP's own syntax)."""
    policy = {name: list(sources) for name, sources in DEFAULT_POLICY.items()}
    for part in extra.split(";"):
        words = part.split()
        if not words:
            continue
        name, sources = words[0].lower(), words[1:]
        if name not in DIRECTIVES:
            raise _bad(f"unknown directive {name!r} (known: {', '.join(sorted(DIRECTIVES))})")
        if not sources:
            raise _bad(f"{name} names no source")
        for source in sources:
            _source_check(source)
        current = policy.get(name) or _inherited(policy, name)
        # An added source replaces 'none': beside other sources browsers ignore it (and warn).
        policy[name] = [s for s in current if s != NONE] + [s for s in sources if s not in current]
    return policy


def _inherited(policy: dict[str, list[str]], name: str) -> list[str]:
    if name in _PARENT:
        return list(policy.get(_PARENT[name]) or policy["default-src"])
    return list(policy["default-src"]) if name in _FETCH else []


def _source_check(source: str) -> None:
    if "," in source:
        raise _bad(f"{source!r} holds a comma: separate sources with spaces and directives with ';'")
    if source.startswith("'") or source.endswith("'"):
        quoted = len(source) > 2 and source[0] == source[-1] == "'"
        if not quoted or not (source[1:-1] in _KEYWORDS or _NONCE_OR_HASH.fullmatch(source)):
            raise _bad(f"{source!r} has an unbalanced quote or is not a CSP keyword, nonce or hash")
        return
    if source.lower() in _KEYWORDS:
        raise _bad(f"{source!r} would name a host: write '{source.lower()}' with its single quotes")


def _bad(problem: str) -> ImproperlyConfigured:
    return ImproperlyConfigured(f"RAG_CSP_EXTRA: {problem}")


class Nonce:
    """A per-response nonce, made the first time a template prints it (so unused, it stays out of the header)."""

    def __init__(self) -> None:
        self.value: str | None = None

    def __str__(self) -> str:
        if self.value is None:
            self.value = secrets.token_urlsafe(16)
        return self.value


def header_value(policy: dict[str, list[str]], nonce: Nonce) -> str:
    parts = []
    for name, sources in policy.items():
        sent = [f"'nonce-{nonce.value}'" if s == NONCE else s for s in sources if s != NONCE or nonce.value]
        parts.append(" ".join([name, *sent]))
    return "; ".join(parts)


class ContentSecurityPolicyMiddleware:
    """Adds CSP_POLICY as Content-Security-Policy (or -Report-Only with RAG_CSP_REPORT_ONLY) to every response.

    A response that already has a policy (a view that needs another) keeps it.
    """

    def __init__(self, get_response: "Callable[[HttpRequest], HttpResponse]") -> None:
        self.get_response = get_response

    def __call__(self, request: "HttpRequest") -> "HttpResponse":
        nonce = Nonce()
        request.csp_nonce = nonce  # type: ignore[attr-defined]
        response = self.get_response(request)
        # Read per response, not at start-up: tests (and a settings override) may switch modes.
        header = "Content-Security-Policy-Report-Only" if settings.RAG_CSP_REPORT_ONLY else "Content-Security-Policy"
        if header not in response:
            response[header] = header_value(settings.CSP_POLICY, nonce)
        return response


def nonce_context(request: "HttpRequest") -> dict[str, object]:
    """Templates print ``{{ csp_nonce }}`` on an inline <style>; it is empty outside the middleware."""
    return {"csp_nonce": getattr(request, "csp_nonce", "")}
