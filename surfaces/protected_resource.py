"""How a client learns to authenticate: OAuth 2.0 Protected Resource Metadata (RFC 9728), as the MCP
authorization spec asks of a server.

This server takes bearer API keys (``manage.py rag_apikey create``) and has no
authorization server. Without being told, an MCP client that gets a 401
(the MCP Inspector) goes looking for one and starts an OAuth flow that cannot
succeed. So every 401 under /api/ and on /mcp carries ``WWW-Authenticate:
Bearer realm=..., resource_metadata="<this site>/.well-known/oauth-protected-resource"``,
and that document names no authorization server: a key in the
``Authorization`` header is the only way in.

The site-wide document's resource is the site (the API and /mcp take the same
keys); ``/.well-known/oauth-protected-resource/mcp`` is the same document for
the resource ``/mcp``, where RFC 9728 puts it and where clients look when a 401
named none.
"""

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_safe

METADATA_PATH = "/.well-known/oauth-protected-resource"
REALM = "rag-site"


def metadata_url(request: HttpRequest) -> str:
    """The absolute URL of the site's metadata document, as this request reached the site (behind the front)."""
    return request.build_absolute_uri(METADATA_PATH)


def bearer_challenge(request: HttpRequest, *, invalid: str | None = None) -> str:
    """``WWW-Authenticate`` for a 401: the realm and where the metadata is; ``invalid``, why a key that was sent
    was refused (RFC 6750: a request without credentials gets no error code)."""
    parts = [f'realm="{REALM}"', f'resource_metadata="{metadata_url(request)}"']
    if invalid is not None:
        parts += ['error="invalid_token"', f'error_description="{_quoted(invalid)}"']
    return "Bearer " + ", ".join(parts)


def _quoted(text: str) -> str:
    # An HTTP quoted-string in a header: printable ASCII without a quote or backslash (RFC 6750 allows no others).
    text = text.replace('"', "'").replace("\\", "/")
    return "".join(c if " " <= c <= "~" else "?" for c in text)


@require_safe
def protected_resource_metadata(request: HttpRequest, resource_path: str = "") -> HttpResponse:
    """The RFC 9728 document: this resource, bearer keys in the header, no authorization server."""
    base = request.build_absolute_uri("/").rstrip("/")
    document = {
        "resource": f"{base}/{resource_path}" if resource_path else base,
        # No authorization_servers: there is none to get a token from; an admin issues API keys.
        "bearer_methods_supported": ["header"],
        "resource_name": "rag-site",
        "resource_documentation": f"{base}/api/docs",
    }
    response = JsonResponse(document)
    # Public, and read by browser-based clients (the MCP Inspector) from another origin.
    response["Access-Control-Allow-Origin"] = "*"
    return response
