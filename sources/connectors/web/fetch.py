"""One GET over a connection to a checked address, with timeouts, a byte limit and bounded redirects.

http.client, not urllib or requests: the connection goes to the address ``addresses.checked_addresses`` approved
(the Host header and TLS name still carry the host name), and nothing from the environment (proxies, netrc) is
consulted. One connection per origin is kept open between requests where the server allows it: a TLS handshake
per page would cost a remote site's crawl several round trips a page.
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
# An unread body (an error page, a redirect's note) this small is read and dropped to keep the connection;
# a larger one costs a new connection instead.
_DRAIN_BYTES = 64 * 1024
_ACCEPT = "text/html, application/xhtml+xml, text/plain;q=0.9, text/markdown;q=0.9, */*;q=0.1"
# What a kept-alive connection the server closed in the meantime raises on reuse; the GET is then sent again once.
_STALE = (http.client.RemoteDisconnected, http.client.BadStatusLine, ConnectionResetError, BrokenPipeError)


@dataclass(frozen=True, slots=True)
class Want:
    """What one GET may take."""

    max_bytes: int  # a larger body is left unread (``Response.too_large``)
    deadline: float  # time.monotonic() by which the crawl ends: the request gives up then too
    accept_types: frozenset[str] | None = None  # media types whose body is read (None: any)
    truncate: bool = False  # a larger body is cut at max_bytes rather than refused (robots.txt: 500 KiB count)


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
    """A connection to the checked ``addresses`` that speaks to ``host`` (the Host header comes from it)."""

    def __init__(self, host: str, port: int, *, addresses: tuple[str, ...], timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.addresses = addresses

    def _open_socket(self) -> socket.socket:
        error: OSError = OSError("no address")
        for address in self.addresses:  # the next address only when one cannot be reached at all
            try:
                return socket.create_connection((address, self.port), self.timeout)
            except OSError as failed:
                error = failed
        raise error

    def connect(self) -> None:
        self.sock = self._open_socket()


class _PinnedHTTPS(_PinnedHTTP):
    """The TLS twin of _PinnedHTTP: the certificate is checked against the host name, not the address."""

    def __init__(self, host: str, port: int, *, addresses: tuple[str, ...], timeout: float, tls: ssl.SSLContext):
        super().__init__(host, port, addresses=addresses, timeout=timeout)
        self.tls = tls

    def connect(self) -> None:
        self.sock = self.tls.wrap_socket(self._open_socket(), server_hostname=self.host)


class Fetcher:
    """GETs for one crawl: each host resolved and checked once, then always reached at the checked address."""

    def __init__(self, *, user_agent: str, allow_private: bool) -> None:
        self.user_agent = user_agent
        self.allow_private = allow_private
        self._addresses: dict[tuple[str, int], tuple[str, ...]] = {}
        self._connections: dict[tuple[str, str, int], _PinnedHTTP] = {}
        self._tls = ssl.create_default_context()

    def addresses(self, host: str, port: int) -> tuple[str, ...]:
        """The checked addresses of ``host``, resolved on first use only (AddressRefused when refused)."""
        key = (host, port)
        if key not in self._addresses:
            self._addresses[key] = checked_addresses(host, port, allow_private=self.allow_private)
        return self._addresses[key]

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    def get(
        self, url: str, *, allowed: Callable[[str], bool], headers_for: Callable[[str], dict[str, str]], want: Want
    ) -> Response:
        """GET ``url``, following redirects to URLs ``allowed`` accepts (at most MAX_REDIRECTS).

        ``headers_for(url)``: extra headers for each hop (the conditional GET's validators).
        """
        for _hop in range(MAX_REDIRECTS + 1):
            response, location = self._get_once(url, headers_for(url), want)
            if location is None:
                return response
            target = normalise_url(location, base=url)
            if target is None or not allowed(target):
                return Response(url=url, status=response.status, problem=f"redirected out of scope to {location}")
            url = target
        return Response(url=url, status=0, problem=f"more than {MAX_REDIRECTS} redirects")

    def _connection(self, scheme: str, host: str, port: int) -> _PinnedHTTP:
        key = (scheme, host, port)
        if key not in self._connections:
            addresses = self.addresses(host, port)
            self._connections[key] = (
                _PinnedHTTPS(host, port, addresses=addresses, timeout=SOCKET_TIMEOUT, tls=self._tls)
                if scheme == "https"
                else _PinnedHTTP(host, port, addresses=addresses, timeout=SOCKET_TIMEOUT)
            )
        return self._connections[key]

    def _get_once(self, url: str, headers: dict[str, str], want: Want) -> tuple[Response, str | None]:
        parts = urlsplit(url)
        try:
            connection = self._connection(parts.scheme, parts.hostname or "", parts.port or _port(parts.scheme))
        except AddressRefused as error:
            return Response(url=url, problem=str(error)), None
        want = replace(want, deadline=min(want.deadline, time.monotonic() + RESPONSE_SECONDS))
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        headers = {"User-Agent": self.user_agent, "Accept": _ACCEPT, "Accept-Encoding": "identity", **headers}
        kept = True
        try:
            for attempt in (1, 2):
                timeout = max(0.1, min(SOCKET_TIMEOUT, want.deadline - time.monotonic()))
                connection.timeout = timeout
                reused = connection.sock is not None
                if reused:
                    connection.sock.settimeout(timeout)
                try:
                    connection.request("GET", target, headers=headers)
                    answer = connection.getresponse()
                except _STALE:
                    connection.close()
                    if reused and attempt == 1:
                        continue
                    raise
                response, location, kept = _read(answer, url, want)
                return response, location
            raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises
        except ssl.SSLError as error:
            kept = False
            return Response(url=url, problem=f"TLS failed: {error}"), None
        except TimeoutError:
            kept = False
            return Response(url=url, problem="timeout", timed_out=True), None
        except (OSError, http.client.HTTPException) as error:
            kept = False
            return Response(url=url, problem=f"connection failed: {error or type(error).__name__}"), None
        finally:
            if not kept:
                connection.close()


def _port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def _read(answer: http.client.HTTPResponse, url: str, want: Want) -> tuple[Response, str | None, bool]:
    """The response, the redirect's Location (None: no redirect) and whether the connection may be used again."""
    message = answer.msg
    response = Response(
        url=url,
        status=answer.status,
        content_type=message.get_content_type() if message.get("Content-Type") else "",
        charset=message.get_content_charset() or "",
        etag=message.get("ETag", ""),
        last_modified=message.get("Last-Modified", ""),
    )
    if answer.status in _REDIRECTS and message.get("Location"):
        return response, message["Location"], _drain(answer)
    if answer.status != 200:
        return response, None, _drain(answer)
    if want.accept_types is not None and response.content_type not in want.accept_types:
        problem = f"not HTML or text ({response.content_type or 'no Content-Type'})"
        return replace(response, problem=problem), None, False
    if message.get("Content-Encoding", "identity").strip().lower() != "identity":
        return replace(response, problem=f"unsupported Content-Encoding {message['Content-Encoding']}"), None, False
    declared = message.get("Content-Length", "")
    if declared.isdigit() and int(declared) > want.max_bytes and not want.truncate:
        return replace(response, problem="too large", too_large=True), None, False
    chunks: list[bytes] = []
    size = 0
    while chunk := answer.read1(_CHUNK):
        size += len(chunk)
        if size > want.max_bytes:
            if not want.truncate:
                return replace(response, problem="too large", too_large=True), None, False
            chunks.append(chunk[: len(chunk) - (size - want.max_bytes)])
            return replace(response, body=b"".join(chunks)), None, False
        if time.monotonic() > want.deadline:
            raise TimeoutError
        chunks.append(chunk)
    answer.read()  # read1 leaves a response whose Content-Length it has consumed open; this marks it done
    return replace(response, body=b"".join(chunks)), None, answer.isclosed()


def _drain(answer: http.client.HTTPResponse) -> bool:
    """Read and drop a small unread body, so the connection can carry the next request; False: close it."""
    if answer.length is None and answer.chunked:
        return False
    if answer.length is not None and answer.length > _DRAIN_BYTES:
        return False
    answer.read(_DRAIN_BYTES)
    return answer.isclosed()
