"""Which URLs a crawl may visit: one origin (scheme, host, port) and the start URL's directory.

URLs are compared in one normal form (``normalise_url``), so a page reached by two spellings is visited once.
"""

from dataclasses import dataclass
from urllib.parse import quote, urljoin, urlsplit, urlunsplit

SCHEMES = ("http", "https")
_DEFAULT_PORTS = {"http": 80, "https": 443}
# What quote() leaves alone in a path or query: RFC 3986's reserved and unreserved characters, and "%" so that an
# already-escaped URL keeps its escapes. Anything else (spaces, non-ASCII) is escaped, which http.client requires.
_SAFE = "/?:@!$&'()*+,;=-._~%"


def normalise_url(url: str, *, base: str = "") -> str | None:
    """``url`` (relative to ``base``) as an absolute http(s) URL in normal form, or None when it cannot be crawled.

    Normal form: scheme and host lower-case, the default port dropped, no fragment, an empty path as "/", dot
    segments resolved, the query kept. None for other schemes (mailto:, javascript:, ...), for a URL without a host
    and for one that carries a user name or password (a crawler never sends credentials found in links).
    """
    try:
        parts = urlsplit(urljoin(base, url.strip()) if base else url.strip())
        port = parts.port
    except ValueError:  # an unterminated IPv6 literal, a port that is not a number
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in SCHEMES or not host or parts.username is not None or parts.password is not None:
        return None
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        netloc = f"{netloc}:{port}"
    path = parts.path or "/"
    if "/." in path:
        path = urljoin("/", path)  # resolves "." and ".." segments (urljoin above only did for a relative url)
    return urlunsplit((scheme, netloc, quote(path, safe=_SAFE), quote(parts.query, safe=_SAFE), ""))


def url_form_problem(url: str) -> str | None:
    """Why ``url`` cannot start a crawl, judged from its text alone (the address check comes after)."""
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number or out of range
    except ValueError as error:
        return f"not a valid URL: {error}"
    if parts.scheme.lower() not in SCHEMES:
        return "only http:// and https:// URLs can be crawled"
    if not parts.hostname:
        return "the URL names no host"
    if parts.username is not None or parts.password is not None:
        return "a URL with a user name or password cannot be crawled"
    return None


@dataclass(frozen=True, slots=True)
class Scope:
    """One origin and a path prefix: the directory of the start URL (``/docs/index.html`` -> ``/docs/``)."""

    scheme: str
    host: str
    port: int
    prefix: str

    @classmethod
    def of(cls, start_url: str) -> "Scope":
        """The scope of a normalised start URL."""
        parts = urlsplit(start_url)
        scheme = parts.scheme
        return cls(
            scheme=scheme,
            host=parts.hostname or "",
            port=parts.port or _DEFAULT_PORTS[scheme],
            prefix=parts.path[: parts.path.rfind("/") + 1] or "/",
        )

    @property
    def origin(self) -> str:
        netloc = f"[{self.host}]" if ":" in self.host else self.host
        if self.port != _DEFAULT_PORTS[self.scheme]:
            netloc = f"{netloc}:{self.port}"
        return f"{self.scheme}://{netloc}"

    def same_origin(self, url: str) -> bool:
        """Whether a normalised URL is on this scope's origin (robots.txt and sitemaps may lie outside the prefix)."""
        return url == self.origin or url.startswith(self.origin + "/")

    def contains(self, url: str) -> bool:
        """Whether a normalised URL is on the origin and under the prefix."""
        return self.same_origin(url) and url[len(self.origin) :].startswith(self.prefix)
