"""One GET over a connection to a checked address, with timeouts, a byte limit and bounded redirects.

http.client, not urllib or requests: the connection goes to the address ``addresses.checked_addresses`` approved
(the Host header and TLS name still carry the host name), and nothing from the environment (proxies, netrc) is
consulted.
"""

import http.client
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from sources.connectors.web.addresses import AddressRefused, checked_addresses
from sources.connectors.web.scope import normalise_url

# Each connect and each read may wait this long: a server that stops answering frees the worker within it.
SOCKET_TIMEOUT = 10.0
# The whole of one response, so a server that drips a byte every few seconds cannot hold a worker either.
RESPONSE_SECONDS = 60.0
MAX_REDIRECTS = 5  # RFC 9309 asks at least five for robots.txt; browsers allow about twenty
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 64 * 1024
_ACCEPT = "text/html, application/xhtml+xml, text/plain;q=0.9, text/markdown;q=0.9, */*;q=0.1"


@dataclass(frozen=True, slots=True)
class Response:
    """What one GET (after its redirects) gave; ``problem`` says why there is no usable answer."""

    url: str  # where the answer came from, after redirects
    status: int = 0  # 0: no HTTP answer (``problem`` says why)
    content_type: str = ""  # the media type, lower-case, without parameters
    charset: str = ""
    etag: str = ""
    last_modified: str = ""
    body: bytes = b""
    problem: str = ""
    too_large: bool = False  # the body was larger than max_bytes (and left unread)
    timed_out: bool = False


class _PinnedHTTP(http.client.HTTPConnection):
    """A connection to ``address`` that speaks to ``host`` (the Host header comes from it)."""

    def __init__(self, host: str, port: int, *, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """The TLS twin of _PinnedHTTP: the certificate is checked against the host name, not the address."""

    def __init__(self, host: str, port: int, *, address: str, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self.address = address
        self.tls = context

    def connect(self) -> None:
        sock = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = self.tls.wrap_socket(sock, server_hostname=self.host)


class Fetcher:
    """GETs for one crawl: each host resolved and checked once, then always reached at the checked address."""

    def __init__(self, *, user_agent: str, allow_private: bool) -> None:
        self.user_agent = user_agent
        self.allow_private = allow_private
        self._addresses: dict[tuple[str, int], tuple[str, ...]] = {}
        self._tls = ssl.create_default_context()

    def addresses(self, host: str, port: int) -> tuple[str, ...]:
        """The checked addresses of ``host``, resolved on first use only (AddressRefused when refused)."""
        key = (host, port)
        if key not in self._addresses:
            self._addresses[key] = checked_addresses(host, port, allow_private=self.allow_private)
        return self._addresses[key]

    def get(
        self,
        url: str,
        *,
        allowed: Callable[[str], bool],
        headers_for: Callable[[str], dict[str, str]],
        max_bytes: int,
        accept_types: frozenset[str] | None,
        deadline: float,
        truncate: bool = False,
    ) -> Response:
        """GET ``url``, following redirects to URLs ``allowed`` accepts (at most MAX_REDIRECTS).

        ``headers_for(url)``: extra headers for each hop (the conditional GET's validators). A body is read only
        for a 200 whose media type is in ``accept_types`` (None: any), and only up to ``max_bytes``. ``deadline``
        (time.monotonic()) ends the request early when the crawl's time is up. ``truncate``: a longer body is cut
        at ``max_bytes`` rather than refused (robots.txt: its first 500 KiB count).
        """
        for _hop in range(MAX_REDIRECTS + 1):
            response, location = self._get_once(url, headers_for(url), max_bytes, accept_types, deadline, truncate)
            if location is None:
                return response
            target = normalise_url(location, base=url)
            if target is None or not allowed(target):
                return Response(url=url, status=response.status, problem=f"redirected out of scope to {location}")
            url = target
        return Response(url=url, status=0, problem=f"more than {MAX_REDIRECTS} redirects")

    def _get_once(
        self,
        url: str,
        headers: dict[str, str],
        max_bytes: int,
        accept_types: frozenset[str] | None,
        deadline: float,
        truncate: bool,
    ) -> tuple[Response, str | None]:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            addresses = self.addresses(host, port)
        except AddressRefused as error:
            return Response(url=url, problem=str(error)), None
        deadline = min(deadline, time.monotonic() + RESPONSE_SECONDS)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        request_headers = {
            "User-Agent": self.user_agent,
            "Accept": _ACCEPT,
            "Accept-Encoding": "identity",
            "Connection": "close",
            **headers,
        }
        problem = ""
        for address in addresses:  # the next address only when one cannot be reached at all
            timeout = max(0.1, min(SOCKET_TIMEOUT, deadline - time.monotonic()))
            connection = (
                _PinnedHTTPS(host, port, address=address, timeout=timeout, context=self._tls)
                if parts.scheme == "https"
                else _PinnedHTTP(host, port, address=address, timeout=timeout)
            )
            try:
                try:
                    connection.connect()
                except (TimeoutError, ConnectionError, OSError) as error:
                    if isinstance(error, ssl.SSLError):
                        return Response(url=url, problem=f"TLS failed: {error}"), None
                    problem = "timeout" if isinstance(error, TimeoutError) else f"connection failed: {error}"
                    continue
                return self._exchange(
                    connection, url, target, request_headers, max_bytes, accept_types, deadline, truncate
                )
            except TimeoutError:
                return Response(url=url, problem="timeout", timed_out=True), None
            except (OSError, http.client.HTTPException) as error:
                return Response(url=url, problem=f"connection failed: {error or type(error).__name__}"), None
            finally:
                connection.close()
        return Response(url=url, problem=problem, timed_out=problem == "timeout"), None

    def _exchange(
        self,
        connection: http.client.HTTPConnection,
        url: str,
        target: str,
        headers: dict[str, str],
        max_bytes: int,
        accept_types: frozenset[str] | None,
        deadline: float,
        truncate: bool,
    ) -> tuple[Response, str | None]:
        connection.request("GET", target, headers=headers)
        answer = connection.getresponse()
        message = answer.msg
        if answer.status in _REDIRECTS and message.get("Location"):
            return Response(url=url, status=answer.status), message["Location"]
        content_type = message.get_content_type() if message.get("Content-Type") else ""
        response = Response(
            url=url,
            status=answer.status,
            content_type=content_type,
            charset=message.get_content_charset() or "",
            etag=message.get("ETag", ""),
            last_modified=message.get("Last-Modified", ""),
        )
        if answer.status != 200:
            return response, None
        if accept_types is not None and content_type not in accept_types:
            return replace(response, problem=f"not HTML or text ({content_type or 'no Content-Type'})"), None
        if message.get("Content-Encoding", "identity").strip().lower() != "identity":
            return replace(response, problem=f"unsupported Content-Encoding {message['Content-Encoding']}"), None
        declared = message.get("Content-Length", "")
        if declared.isdigit() and int(declared) > max_bytes and not truncate:
            return replace(response, problem="too large", too_large=True), None
        chunks: list[bytes] = []
        size = 0
        while chunk := answer.read1(_CHUNK):
            size += len(chunk)
            if size > max_bytes:
                if truncate:
                    chunks.append(chunk[: len(chunk) - (size - max_bytes)])
                    break
                return replace(response, problem="too large", too_large=True), None
            if time.monotonic() > deadline:
                raise TimeoutError
            chunks.append(chunk)
        return replace(response, body=b"".join(chunks)), None
