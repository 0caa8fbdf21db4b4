"""The web crawler (sources/connectors/web/): against real HTTP servers on 127.0.0.1, and its parts one by one.

Every server here listens on 127.0.0.1, a loopback address, so every crawl passes ``allow_private=True``; one
test shows the same crawl refused without it.
"""

import datetime
import gzip
import ipaddress
import os
import posixpath
import re
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from html import unescape
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from sources.config import web_limits
from sources.connectors.web import addresses, fetch
from sources.connectors.web.addresses import AddressRefused, address_kind, checked_addresses
from sources.connectors.web.crawl import CrawlLimits, CrawlRefused, Page, Validators, crawl, web_url_problem
from sources.connectors.web.links import page_links
from sources.connectors.web.robots import DISALLOWED, robots_from_response
from sources.connectors.web.scope import Scope, normalise_url
from sources.connectors.web.sitemap import sitemap_parse

pytestmark = pytest.mark.unit

LIMITS = CrawlLimits(
    max_pages=1000, max_page_bytes=1024 * 1024, max_total_bytes=50 * 1024 * 1024, max_seconds=120, allow_private=True
)


# --- a small site, served by a real threaded HTTP server -------------------------------------------------------


class _Handler(SimpleHTTPRequestHandler):
    """Files from the site's directory with Last-Modified (the stdlib's) and an ETag (ours), both honoured with a
    304; a few paths the tests need besides: redirects, an endless body and a page that hangs."""

    server: "_Server"
    protocol_version = "HTTP/1.1"  # keeps connections open between requests, as real servers do

    def setup(self) -> None:
        self.server.connections += 1
        self.timeout = self.server.idle_timeout  # how long an idle kept-alive connection stays open
        super().setup()

    def send_head(self):  # type: ignore[no-untyped-def]
        path = urlsplit(self.path).path
        self.server.requests.append((path, self.headers.get("Host", "")))
        self.server.arrivals.append(time.monotonic())
        if path in self.server.redirects:
            self.send_response(301)
            self.send_header("Location", self.server.redirects[path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        if path == "/docs/endless.html":
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()  # no Content-Length: the crawler must stop reading by itself
            try:
                for _ in range(10_000):
                    self.wfile.write(b"<p>" + b"x" * 65536)
            except OSError:
                pass
            return None
        if path == "/docs/hang.html":
            time.sleep(3)
        file = Path(self.translate_path(self.path))
        self.etag = ""
        if file.is_file():
            stat = file.stat()
            etag = f'"{stat.st_mtime_ns:x}-{stat.st_size:x}"'
            if self.headers.get("If-None-Match") == etag:
                self.send_response(304)
                self.send_header("ETag", etag)
                self.end_headers()
                return None
            self.etag = etag
        return super().send_head()

    def end_headers(self) -> None:
        if getattr(self, "etag", ""):
            self.send_header("ETag", self.etag)
            self.etag = ""
        super().end_headers()

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        self.server.answers.append((urlsplit(self.path).path, int(code)))

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, directory: Path) -> None:
        self.requests: list[tuple[str, str]] = []  # (path, Host header) of every request
        self.answers: list[tuple[str, int]] = []  # (path, status) of every answer
        self.redirects: dict[str, str] = {}
        self.connections = 0
        self.arrivals: list[float] = []  # time.monotonic() of each request, in the order of ``requests``
        self.idle_timeout: float | None = None

        def handler(*args, **kwargs):  # type: ignore[no-untyped-def]
            return _Handler(*args, directory=str(directory), **kwargs)

        super().__init__(("127.0.0.1", 0), handler)

    def handle_error(self, request, client_address) -> None:  # type: ignore[no-untyped-def]
        pass  # a client that hung up mid-answer (the hang and endless tests do so on purpose): no traceback

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def bodies(self) -> list[str]:
        """The paths answered 200, robots.txt and sitemaps aside: the pages whose body the server sent."""
        return [path for path, code in self.answers if code == 200 and path not in ("/robots.txt", "/sitemap.xml")]


@pytest.fixture
def serve() -> Iterator:
    servers: list[_Server] = []

    def start(directory: Path) -> _Server:
        server = _Server(directory)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


@pytest.fixture
def site(tmp_path: Path, serve) -> _Server:
    """A site whose /docs/ holds a few interlinked pages, a robots.txt rule, a sitemap and a non-HTML file."""
    root = tmp_path / "site"
    server = serve(root)
    _write(
        root,
        {
            "robots.txt": f"User-agent: *\nDisallow: /docs/private/\n\nSitemap: {server.base}/sitemap.xml\n",
            "sitemap.xml": (
                '<?xml version="1.0" encoding="UTF-8"?>\n'
                '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
                f"<url><loc>{server.base}/docs/orphan.html</loc></url>\n"
                f"<url><loc>{server.base}/outside.html</loc></url>\n"
                "</urlset>\n"
            ),
            "outside.html": "<p>not under /docs/</p>",
            "docs/index.html": (
                '<a href="a.html">A</a> <a href="b.html#part">B</a> <a href="sub/c.html">C</a>'
                '<a href="private/secret.html">secret</a> <a href="../outside.html">out</a>'
                '<a href="mailto:x@example.org">mail</a> <a href="javascript:void(0)">js</a>'
                '<a href="data.bin">data</a> <a href="notes.txt">notes</a> <a href="http://other.example/docs/">x</a>'
                '<a href="#top">top</a>'
            ),
            "docs/a.html": '<a href="index.html">home</a> <a href="gone.html">soon gone</a>',
            "docs/b.html": '<link rel="next" href="sub/c.html"><link rel="stylesheet" href="style.css">',
            "docs/sub/c.html": '<a href="../a.html?x=1">A with a query</a>',
            "docs/gone.html": "<p>about to be deleted</p>",
            "docs/orphan.html": "<p>listed in the sitemap only</p>",
            "docs/private/secret.html": "<p>robots.txt keeps this out</p>",
            "docs/notes.txt": "plain text is read too",
            "docs/style.css": "p {}",
        },
    )
    (root / "docs/data.bin").write_bytes(b"\x00\x01" * 100)
    return server


def _crawl(url: str, known: dict[str, Validators] | None = None, **limits: object) -> list[Page]:
    return list(crawl(url, known=known or {}, limits=replace(LIMITS, **limits)))  # type: ignore[arg-type]


def _by_url(pages: list[Page]) -> dict[str, Page]:
    urls = [page.url for page in pages]
    assert len(urls) == len(set(urls)), "each URL is reported once"
    return {page.url: page for page in pages}


def _known(pages: list[Page]) -> dict[str, Validators]:
    """What the pipeline would store of a crawl: each page it has, with its validators and links."""
    return {
        page.url: Validators(etag=page.etag, last_modified=page.last_modified, links=page.links)
        for page in pages
        if page.status in ("fetched", "unchanged")
    }


def test_it_crawls_every_page_in_scope_and_nothing_else(site: _Server) -> None:
    docs = f"{site.base}/docs/"
    pages = _by_url(_crawl(docs + "index.html"))

    fetched = {url for url, page in pages.items() if page.status == "fetched"}
    assert fetched == {
        docs + name for name in ("index.html", "a.html", "b.html", "sub/c.html", "a.html?x=1", "notes.txt", "gone.html")
    } | {docs + "orphan.html"}  # the sitemap robots.txt declares seeds a page no link reaches
    assert pages[docs + "private/secret.html"].status == "skipped"
    assert pages[docs + "private/secret.html"].reason == DISALLOWED
    assert pages[docs + "data.bin"].status == "skipped"
    assert "not HTML or text" in pages[docs + "data.bin"].reason
    assert pages[docs + "index.html"].links == tuple(
        docs + name for name in ("a.html", "b.html", "sub/c.html", "private/secret.html", "data.bin", "notes.txt")
    )
    assert pages[docs + "b.html"].links == (docs + "sub/c.html",)  # <link rel=next>, not the stylesheet
    assert pages[docs + "index.html"].body.startswith(b'<a href="a.html">')
    assert pages[docs + "index.html"].content_type == "text/html"
    assert pages[docs + "index.html"].etag and pages[docs + "index.html"].last_modified
    requested = {path for path, _host in site.requests}
    assert "/outside.html" not in requested
    assert "/docs/private/secret.html" not in requested
    assert "/docs/style.css" not in requested
    assert not any(url.startswith("http://other.example") for url in pages)


def test_a_second_crawl_of_an_unchanged_site_reads_no_page_body(site: _Server) -> None:
    docs = f"{site.base}/docs/"
    first = _crawl(docs + "index.html")
    site.answers.clear()

    second = _by_url(_crawl(docs + "index.html", _known(first)))

    # Only data.bin is answered in full again: its type is known from the headers alone, and its body left unread.
    assert site.bodies() == ["/docs/data.bin"]
    assert {url for url, page in second.items() if page.status == "unchanged"} == {
        page.url for page in first if page.status == "fetched"
    }
    assert second[docs + "sub/c.html"].links == (docs + "a.html?x=1",)  # carried over, so the crawl went on


def test_it_reports_a_deleted_page_gone_and_fetches_a_changed_one(site: _Server, tmp_path: Path) -> None:
    docs = f"{site.base}/docs/"
    first = _crawl(docs + "index.html")
    root = tmp_path / "site" / "docs"
    (root / "gone.html").unlink()
    (root / "b.html").write_text("<p>changed</p>", encoding="utf-8")
    later = time.time() + 10  # Last-Modified counts whole seconds: make the change visible to it too
    os.utime(root / "b.html", (later, later))
    known = _known(first) | {docs + "never-linked.html": Validators(etag='"old"')}

    second = _by_url(_crawl(docs + "index.html", known))

    assert second[docs + "gone.html"].status == "gone"
    assert second[docs + "never-linked.html"].status == "gone"  # known, linked from nowhere: still checked
    assert second[docs + "b.html"].status == "fetched"
    assert second[docs + "b.html"].body == b"<p>changed</p>"
    assert second[docs + "b.html"].links == ()
    assert second[docs + "a.html"].status == "unchanged"


def test_a_sitemap_start_url_seeds_the_pages_it_lists_within_the_prefix(site: _Server, tmp_path: Path) -> None:
    _write(
        tmp_path / "site",
        {
            "docs/sitemap-index.xml": (
                '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                f"<sitemap><loc>{site.base}/docs/pages.xml</loc></sitemap></sitemapindex>"
            ),
            "docs/pages.xml": (
                '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                f"<url><loc>{site.base}/docs/sub/c.html</loc></url>"
                f"<url><loc>{site.base}/outside.html</loc></url></urlset>"
            ),
        },
    )
    pages = _by_url(_crawl(f"{site.base}/docs/sitemap-index.xml"))

    # c.html from the sitemap, then what it links to, and so on; the site's own sitemap (orphan.html) is not read.
    assert {url: page.status for url, page in pages.items()} == {
        f"{site.base}/docs/sub/c.html": "fetched",
        f"{site.base}/docs/a.html?x=1": "fetched",
        f"{site.base}/docs/index.html": "fetched",
        f"{site.base}/docs/gone.html": "fetched",
        **{f"{site.base}/docs/{name}": "fetched" for name in ("a.html", "b.html", "notes.txt")},
        f"{site.base}/docs/private/secret.html": "skipped",
        f"{site.base}/docs/data.bin": "skipped",
    }
    assert "/outside.html" not in {path for path, _host in site.requests}


def test_a_sitemap_that_cannot_be_read_is_reported(site: _Server) -> None:
    pages = _crawl(f"{site.base}/docs/missing.xml")

    assert [(page.status, page.reason) for page in pages] == [("skipped", "sitemap not read: HTTP 404")]


def test_redirects_are_followed_within_scope_only(site: _Server) -> None:
    docs = f"{site.base}/docs/"
    site.redirects.update(
        {"/docs/moved.html": "/docs/b.html", "/docs/away.html": "/outside.html", "/docs/loop.html": "/docs/loop.html"}
    )
    assert [(page.url, page.status) for page in _crawl(docs + "moved.html")][0] == (docs + "b.html", "fetched")

    away = _crawl(docs + "away.html")[0]
    assert away.status == "skipped"
    assert away.reason == "redirected out of scope to /outside.html"
    loop = _crawl(docs + "loop.html")[0]
    assert loop.reason == "more than 5 redirects"
    assert "/outside.html" not in {path for path, _host in site.requests}


def test_one_connection_carries_many_requests(site: _Server) -> None:
    pages = _crawl(f"{site.base}/docs/index.html")

    assert len([page for page in pages if page.status == "fetched"]) == 8
    # robots.txt, the sitemap and 9 pages; a second connection only after data.bin, whose body is left unread.
    assert len(site.requests) == 11
    assert site.connections == 2


def test_a_kept_connection_the_server_closed_is_opened_again(site: _Server) -> None:
    site.idle_timeout = 0.1
    pages = []
    for page in crawl(f"{site.base}/docs/index.html", known={}, limits=LIMITS):
        pages.append(page)
        time.sleep(0.3)  # the server has closed the idle connection by now

    assert len([page for page in pages if page.status == "fetched"]) == 8
    assert site.connections >= 8


def test_robots_crawl_delay_spaces_the_requests(site: _Server, tmp_path: Path) -> None:
    (tmp_path / "site/robots.txt").write_text("User-agent: *\nCrawl-delay: 1\n", encoding="utf-8")
    pages = _crawl(f"{site.base}/docs/index.html", max_pages=3)

    assert len(pages) == 4  # three pages and the limit's note
    times = [
        when for (path, _host), when in zip(site.requests, site.arrivals, strict=True) if path.startswith("/docs/")
    ]
    assert len(times) == 3
    # A lower bound, never a duration: the requests were not sent closer together (less the network's jitter).
    assert times[1] - times[0] >= 0.9 and times[2] - times[1] >= 0.9


def test_the_page_limit_ends_the_crawl_with_a_note(site: _Server) -> None:
    pages = _crawl(f"{site.base}/docs/index.html", max_pages=3)

    assert [page.status for page in pages] == ["fetched", "fetched", "fetched", "skipped"]
    assert pages[-1].reason == "limit reached: 3 pages (RAG_WEB_MAX_PAGES)"
    assert len(site.bodies()) == 3


def test_the_byte_limits_skip_a_large_page_and_end_the_crawl(site: _Server, tmp_path: Path) -> None:
    docs = f"{site.base}/docs/"
    (tmp_path / "site/docs/a.html").write_bytes(b"<p>" + b"a" * 5000)

    pages = _by_url(_crawl(docs + "index.html", max_page_bytes=4000))
    assert pages[docs + "a.html"].status == "skipped"
    assert pages[docs + "a.html"].reason == "too large (over 4000 bytes)"
    assert pages[docs + "b.html"].status == "fetched"

    # robots.txt, the sitemap and index.html take about 1.1 kB; then only 400 bytes are left for a.html.
    pages = _by_url(_crawl(docs + "index.html", max_total_bytes=1500))
    read = sum(len(page.body) for page in pages.values())
    assert read <= 1500
    last = list(pages.values())[-1]
    assert last.status == "skipped"
    assert last.reason == "limit reached: 1500 bytes read (RAG_WEB_MAX_CRAWL_MB)"


def test_it_stops_reading_an_endless_body(site: _Server) -> None:
    page = _crawl(f"{site.base}/docs/endless.html", max_page_bytes=200_000)[0]

    assert page.status == "skipped"
    assert page.reason == "too large (over 200000 bytes)"


def test_the_time_limit_ends_the_crawl_with_a_note(site: _Server) -> None:
    (page,) = _crawl(f"{site.base}/docs/index.html", max_seconds=0)

    assert page.status == "skipped"
    assert page.reason == "limit reached: 0 seconds (RAG_WEB_MAX_CRAWL_SECONDS)"


def test_a_page_that_hangs_times_out(site: _Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fetch, "SOCKET_TIMEOUT", 0.5)

    page = _crawl(f"{site.base}/docs/hang.html")[0]

    assert (page.status, page.reason) == ("skipped", "timeout")


def test_a_server_that_never_answers_cannot_hold_the_crawl(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as listener:  # accepts connections (the kernel's backlog) and never says a word
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/docs/"

        # The crawl's time runs out while robots.txt is awaited.
        assert [(page.status, page.reason) for page in _crawl(url, max_seconds=1)] == [
            ("skipped", "limit reached: 1 seconds (RAG_WEB_MAX_CRAWL_SECONDS)")
        ]
        # The read times out first: an unreachable robots.txt means crawl nothing (RFC 9309).
        monkeypatch.setattr(fetch, "SOCKET_TIMEOUT", 0.5)
        assert [(page.status, page.reason) for page in _crawl(url)] == [
            ("skipped", "robots.txt unavailable (timeout): nothing fetched")
        ]


def test_a_private_address_is_refused_unless_allowed(site: _Server) -> None:
    url = f"{site.base}/docs/index.html"

    with pytest.raises(CrawlRefused, match="127.0.0.1, a loopback address"):
        _crawl(url, allow_private=False)
    assert site.requests == []  # refused before any request
    assert "loopback" in (web_url_problem(url, allow_private=False) or "")
    assert web_url_problem(url, allow_private=True) is None


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ftp://example.org/", "only http:// and https:// URLs can be crawled"),
        ("file:///etc/passwd", "only http:// and https:// URLs can be crawled"),
        ("http:///docs/", "the URL names no host"),
        ("http://user:secret@example.org/", "a URL with a user name or password cannot be crawled"),
        ("http://example.org:99999/", "not a valid URL: Port out of range 0-65535"),
        ("http://no-such-host.invalid/", "the host 'no-such-host.invalid' does not resolve"),
    ],
)
def test_a_start_url_that_cannot_be_crawled_is_refused_with_the_reason(url: str, problem: str) -> None:
    assert (web_url_problem(url, allow_private=False) or "").startswith(problem)
    with pytest.raises(CrawlRefused, match="^" + re.escape(problem)):
        crawl(url, known={}, limits=LIMITS)


def test_the_crawl_connects_to_the_address_it_checked(site: _Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """DNS rebinding: the host is resolved once; every request goes to that address, naming the host."""
    real = socket.getaddrinfo
    lookups: list[str] = []

    def getaddrinfo(host, *args, **kwargs):  # type: ignore[no-untyped-def]
        if host == "docs.test":
            lookups.append(host)
            # The first answer passes the check; any later one would point elsewhere.
            return real("127.0.0.1" if len(lookups) == 1 else "192.0.2.1", *args, **kwargs)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    port = site.server_address[1]

    pages = _crawl(f"http://docs.test:{port}/docs/index.html")

    # The site's sitemaps name 127.0.0.1, another origin: orphan.html is not reached this way.
    assert len([page for page in pages if page.status == "fetched"]) == 7
    assert lookups == ["docs.test"]
    assert {host for _path, host in site.requests} == {f"docs.test:{port}"}
    assert pages[0].url == f"http://docs.test:{port}/docs/index.html"


def _certificate(directory: Path, host: str) -> tuple[Path, Path]:
    """A self-signed certificate for ``host`` and its key, as PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


def test_https_reaches_the_checked_address_under_the_host_name(
    site: _Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TLS to the pinned address: the certificate is checked against the host name the URL gives (SNI too)."""
    cert_file, key_file = _certificate(tmp_path, "docs.test")
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert_file, key_file)
    site.socket = tls.wrap_socket(site.socket, server_side=True)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert_file))  # the crawler's default context trusts it, and only it
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):  # type: ignore[no-untyped-def]
        return real("127.0.0.1" if host == "docs.test" else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    port = site.server_address[1]

    pages = _crawl(f"https://docs.test:{port}/docs/index.html")
    assert len([page for page in pages if page.status == "fetched"]) == 7
    assert {host for _path, host in site.requests} == {f"docs.test:{port}"}

    # The same server under a name its certificate does not carry: nothing is read.
    (refused,) = _crawl(f"https://127.0.0.1:{port}/docs/index.html")
    assert refused.status == "skipped"
    assert refused.reason.startswith("robots.txt unavailable (TLS failed: [SSL: CERTIFICATE_VERIFY_FAILED]")


def test_the_limits_come_from_the_settings(settings) -> None:  # type: ignore[no-untyped-def]
    settings.RAG_WEB_MAX_PAGES, settings.RAG_WEB_MAX_PAGE_MB, settings.RAG_WEB_MAX_CRAWL_MB = 7, 2, 30
    settings.RAG_WEB_MAX_CRAWL_SECONDS, settings.RAG_WEB_ALLOW_PRIVATE = 60, True

    assert web_limits() == CrawlLimits(
        max_pages=7,
        max_page_bytes=2 * 1024 * 1024,
        max_total_bytes=30 * 1024 * 1024,
        max_seconds=60.0,
        allow_private=True,
    )


# --- Python's documentation, served by `python -m http.server` -------------------------------------------------

PYTHON_DOCS = Path("/usr/share/doc/python3/html")
# contents.html is 2.5 MB; the defaults (RAG_WEB_*) would do, these keep the test's own limits visible.
DOCS_LIMITS = {"max_pages": 20_000, "max_page_bytes": 5 * 1024 * 1024, "max_total_bytes": 500 * 1024 * 1024}


# Sphinx writes every link as <a ... href="..."> or <link rel="next" ... href="...">, in double quotes: plain
# regular expressions read them, independently of the crawler's own link extraction.
_DISK_LINKS = re.compile(r'<a\s[^>]*?\bhref="([^"]*)"|<link\s+rel="next"[^>]*?\bhref="([^"]*)"')


def _reachable(root: Path, start: str) -> dict[str, Path | None]:
    """Every URL path reachable from ``start`` through relative links between the files (None: no such file)."""
    found: dict[str, Path | None] = {}
    pending = [start]
    while pending:
        path = pending.pop()
        if path in found:
            continue
        file = root / unquote(path).lstrip("/")
        if file.is_dir():
            file = file / "index.html"
        found[path] = file if file.is_file() else None
        if not file.is_file() or file.suffix != ".html":
            continue
        text = file.read_text(encoding="utf-8", errors="replace")
        for href in (unescape(a or link) for a, link in _DISK_LINKS.findall(text)):
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or not parts.path:
                continue  # another site, or a place on this page
            target = posixpath.normpath(posixpath.join(posixpath.dirname(path), parts.path))
            if parts.path.endswith("/") or (root / unquote(target).lstrip("/")).is_dir():
                target += "/"  # http.server redirects a directory to its slashed URL
            pending.append(target + (f"?{parts.query}" if parts.query else ""))
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def python_docs() -> Iterator[str]:
    if not (PYTHON_DOCS / "index.html").is_file():
        pytest.skip(f"{PYTHON_DOCS} is absent: install Debian's python3-doc (`make browser` does, as root)")
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(PYTHON_DOCS)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.slow
def test_it_crawls_the_python_documentation_completely_and_then_reads_nothing(python_docs: str) -> None:
    began = time.monotonic()
    first = _by_url(_crawl(f"{python_docs}/index.html", **DOCS_LIMITS))
    seconds = time.monotonic() - began

    expected = _reachable(PYTHON_DOCS.resolve(), "/index.html")
    crawled = {
        urlsplit(url).path + (f"?{urlsplit(url).query}" if urlsplit(url).query else ""): page
        for url, page in first.items()
    }
    assert set(crawled) == set(expected)
    for path, file in expected.items():
        text = file is not None and file.suffix in (".html", ".txt")
        wanted = "fetched" if text else ("gone" if file is None else "skipped")
        assert crawled[path].status == wanted, (path, crawled[path].reason)
    fetched = [page for page in first.values() if page.status == "fetched"]
    assert len([page for page in fetched if page.content_type == "text/html"]) >= 500

    began = time.monotonic()
    second = _crawl(f"{python_docs}/index.html", _known(list(first.values())), **DOCS_LIMITS)
    again = time.monotonic() - began

    assert [page.url for page in second if page.status == "fetched"] == []
    assert {page.url for page in second if page.status == "unchanged"} == {page.url for page in fetched}
    print(
        f"\npython3-doc: first crawl {len(first)} URLs, {len(fetched)} fetched "
        f"({len([p for p in fetched if p.content_type == 'text/html'])} HTML), "
        f"{sum(len(p.body) for p in fetched)} bytes, {seconds:.1f} s; "
        f"second crawl {len(second)} URLs, "
        f"{sum(1 for p in second if p.status == 'fetched')} bodies, "
        f"{sum(1 for p in second if p.status == 'unchanged')} unchanged, {again:.1f} s"
    )


# --- the parts ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),  # the cloud metadata endpoint
        ("224.0.0.1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("100.64.0.1", "not globally routable"),  # carrier-grade NAT
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fc00::1", "private"),  # ULA
        ("fe80::1", "link-local"),
        ("ff02::1", "multicast"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
        ("::ffff:10.0.0.1", "private"),
        ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
        ("8.8.8.8", None),
        ("2606:4700:4700::1111", None),
    ],
)
def test_addresses_are_classified(address: str, kind: str | None) -> None:
    assert address_kind(ipaddress.ip_address(address)) == kind


def test_a_host_with_any_private_address_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def getaddrinfo(host, port, *args, **kwargs):  # type: ignore[no-untyped-def]
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.5", port)),
        ]

    monkeypatch.setattr(addresses.socket, "getaddrinfo", getaddrinfo)

    with pytest.raises(AddressRefused, match="resolves to 10.0.0.5, a private address"):
        checked_addresses("mixed.example", 80, allow_private=False)
    assert checked_addresses("mixed.example", 80, allow_private=True) == ("93.184.215.14", "10.0.0.5")


@pytest.mark.parametrize(
    ("url", "normal"),
    [
        ("HTTP://Example.ORG:80/a/b.html#frag", "http://example.org/a/b.html"),
        ("https://example.org:443", "https://example.org/"),
        ("https://example.org:8443/x?b=2&a=1#f", "https://example.org:8443/x?b=2&a=1"),
        ("http://example.org/a/./b/../c.html", "http://example.org/a/c.html"),
        ("http://example.org/a b/ü.html", "http://example.org/a%20b/%C3%BC.html"),
        ("http://example.org/a%20b.html", "http://example.org/a%20b.html"),
        ("http://[::1]:8000/x", "http://[::1]:8000/x"),
        ("mailto:someone@example.org", None),
        ("javascript:alert(1)", None),
        ("ftp://example.org/", None),
        ("http://user:pw@example.org/", None),
        ("http://[::1/", None),
    ],
)
def test_urls_are_normalised(url: str, normal: str | None) -> None:
    assert normalise_url(url) == normal


def test_relative_links_are_resolved_against_the_page() -> None:
    page = "http://example.org/docs/guide/intro.html"
    assert normalise_url("../api.html#x", base=page) == "http://example.org/docs/api.html"
    assert normalise_url("?page=2", base=page) == "http://example.org/docs/guide/intro.html?page=2"
    assert normalise_url("//Other.example/x", base=page) == "http://other.example/x"


@pytest.mark.parametrize(
    ("start", "prefix"),
    [
        ("http://h/docs/index.html", "/docs/"),
        ("http://h/docs/", "/docs/"),
        ("http://h/docs", "/"),
        ("http://h/", "/"),
        ("http://h/docs/sitemap.xml", "/docs/"),
    ],
)
def test_the_scope_is_the_start_urls_directory(start: str, prefix: str) -> None:
    assert Scope.of(start).prefix == prefix


def test_the_scope_holds_one_origin_and_prefix() -> None:
    scope = Scope.of("http://h.example:8080/docs/index.html")

    assert scope.contains("http://h.example:8080/docs/deep/page.html?q=1")
    assert scope.contains("http://h.example:8080/docs/")
    assert not scope.contains("http://h.example:8080/docsx/page.html")
    assert not scope.contains("http://h.example:8080/other/page.html")
    assert not scope.contains("https://h.example:8080/docs/page.html")
    assert not scope.contains("http://h.example/docs/page.html")
    assert not scope.contains("http://h.example:8080.evil.example/docs/page.html")
    assert scope.same_origin("http://h.example:8080/robots.txt")


def test_links_are_extracted_normalised_and_once() -> None:
    html = b"""<html><head><link rel="next" href="two.html"><link rel="stylesheet" href="s.css"></head>
        <body><a href="a.html#x">a</a><a href="a.html">again</a><a href="#top">top</a>
        <a href="mailto:x@example.org">m</a><a href="javascript:go()">j</a><a>no href</a>
        <map><area href="/area.html"></map><a href=" sub/b.html?q=1 ">b</a>
        <a href="https://other.example/">other</a></body></html>"""

    assert page_links(html, url="http://h/docs/one.html") == (
        "http://h/docs/two.html",
        "http://h/docs/a.html",
        "http://h/area.html",
        "http://h/docs/sub/b.html?q=1",
        "https://other.example/",
    )


def test_links_follow_the_base_element_and_meta_nofollow() -> None:
    based = b'<base href="/elsewhere/"><a href="x.html">x</a>'
    assert page_links(based, url="http://h/docs/one.html") == ("http://h/elsewhere/x.html",)
    nofollow = b'<meta name="robots" content="noindex, nofollow"><a href="x.html">x</a>'
    assert page_links(nofollow, url="http://h/docs/one.html") == ()


def test_robots_rules_apply_to_our_user_agent() -> None:
    body = b"""User-agent: rag-site
Disallow: /docs/drafts/

User-agent: *
Disallow: /

Sitemap: http://h/sitemap.xml
"""
    robots = robots_from_response(status=200, body=body, user_agent="rag-site")
    assert robots.allows("http://h/docs/page.html")
    assert not robots.allows("http://h/docs/drafts/page.html")
    assert robots.sitemaps == ("http://h/sitemap.xml",)
    assert robots.delay == 0
    assert robots_from_response(status=200, body=b"User-agent: *\nCrawl-delay: 3\n", user_agent="x").delay == 3
    other = robots_from_response(status=200, body=body, user_agent="another-bot")
    assert not other.allows("http://h/docs/page.html")


@pytest.mark.parametrize(
    ("status", "allowed", "reason"),
    [
        (404, True, DISALLOWED),
        (410, True, DISALLOWED),
        (403, False, "robots.txt is forbidden (HTTP 403)"),
        (503, False, "robots.txt unavailable (HTTP 503): nothing fetched"),
        (0, False, "robots.txt unavailable (no answer): nothing fetched"),
    ],
)
def test_a_missing_or_unreachable_robots_txt(status: int, allowed: bool, reason: str) -> None:
    robots = robots_from_response(status=status, body=b"", user_agent="rag-site")
    assert robots.allows("http://h/docs/") is allowed
    assert robots.reason == reason


def test_sitemaps_of_each_kind_are_read() -> None:
    urlset = b"""<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
        <url><loc> http://h/docs/a.html </loc><lastmod>2024-01-01</lastmod></url><url><loc>b.html</loc></url>
        </urlset>"""
    assert sitemap_parse(urlset, url="http://h/docs/sitemap.xml").pages == (
        "http://h/docs/a.html",
        "http://h/docs/b.html",
    )
    index = b"""<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
        <sitemap><loc>http://h/one.xml</loc></sitemap></sitemapindex>"""
    assert sitemap_parse(index, url="http://h/sitemap.xml").sitemaps == ("http://h/one.xml",)
    assert sitemap_parse(b"http://h/a.html\nhttp://h/b.html\n", url="http://h/s.txt").pages == (
        "http://h/a.html",
        "http://h/b.html",
    )
    assert sitemap_parse(gzip.compress(urlset), url="http://h/docs/s.xml.gz").pages[0] == "http://h/docs/a.html"


def test_a_hostile_sitemap_is_not_expanded() -> None:
    bomb = b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><urlset><url><loc>&a;</loc></url></urlset>'
    assert sitemap_parse(bomb, url="http://h/s.xml").problem == "a sitemap with a document type declaration is not read"
    zipped = gzip.compress(b"<urlset>" + b" " * 10_000_000 + b"</urlset>")
    assert "inflates past the limit" in sitemap_parse(zipped, url="http://h/s.xml.gz", limit=1000).problem


def test_links_in_comments_scripts_and_styles_are_no_links() -> None:
    html = b"""<!-- <a href="commented.html"> --><script>var s = '<a href="scripted.html">';</script>
        <STYLE>a::after { content: "<a href='styled.html'>" }</STYLE>
        <A TITLE="1 > 0" HREF="real.html">real</A><abbr title="x">not a link</abbr>"""

    assert page_links(html, url="http://h/docs/") == ("http://h/docs/real.html",)


def test_a_page_of_unclosed_tags_is_read_in_one_pass() -> None:
    """Thousands of "<a" that never close must not make link extraction quadratic (it would take minutes)."""
    for hostile in (b'<a href="x' * 200_000, b"<!--" * 200_000, b"<script>" * 200_000, b"<a " * 200_000):
        assert page_links(hostile, url="http://h/docs/") == ()
