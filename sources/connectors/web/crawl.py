"""Crawling one web site: the pages under a start URL, breadth-first, as the indexing pipeline asks for them.

No database here: the pipeline passes what it stored of each page (``Validators``) and gets ``Page`` answers it
turns into index changes. A page is fetched only when it changed (conditional GET); a 304 page still leads the
crawl on through the links it had, so a second crawl of an unchanged site reads no bodies at all.
"""

import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from kernel.errors import ApplicationError
from sources.connectors.web.addresses import AddressRefused, checked_addresses
from sources.connectors.web.fetch import Fetcher, Response, Want
from sources.connectors.web.links import HTML_TYPES, page_links
from sources.connectors.web.robots import MAX_ROBOTS_BYTES, Robots, robots_from_response
from sources.connectors.web.scope import Scope, normalise_url, url_form_problem
from sources.connectors.web.sitemap import MAX_SITEMAP_BYTES, MAX_SITEMAPS, sitemap_parse

FETCHED = "fetched"  # 200: the body is here
UNCHANGED = "unchanged"  # 304: what was stored still holds
GONE = "gone"  # 404 or 410: the page left the site
SKIPPED = "skipped"  # not read; ``reason`` says why

# What the pipeline can turn into text; anything else is skipped before its body is read.
TEXT_TYPES = HTML_TYPES | {"text/plain", "text/markdown", "text/x-markdown"}


@dataclass(frozen=True, slots=True)
class Validators:
    """What an earlier crawl stored for one URL."""

    etag: str = ""
    last_modified: str = ""
    links: tuple[str, ...] = ()  # the page's in-scope links, so a 304 page still leads the crawl on


@dataclass(frozen=True, slots=True)
class Page:
    """One URL's outcome in a crawl."""

    url: str  # absolute, normalised (no fragment; scheme/host lower-case)
    status: str  # FETCHED | UNCHANGED | GONE | SKIPPED
    body: bytes = b""
    content_type: str = ""
    etag: str = ""
    last_modified: str = ""
    links: tuple[str, ...] = ()  # in-scope links found (fetched) or carried from Validators (unchanged)
    reason: str = ""  # why skipped: robots.txt, too large, not HTML/text, HTTP 500, timeout, limit reached ...
    charset: str = ""  # the Content-Type's charset, for decoding the body ("" when it names none)


@dataclass(frozen=True, slots=True)
class CrawlLimits:
    max_pages: int  # RAG_WEB_MAX_PAGES: page requests (fetched, unchanged, gone or failed)
    max_page_bytes: int  # RAG_WEB_MAX_PAGE_MB: a larger page is skipped unread
    max_total_bytes: int  # RAG_WEB_MAX_CRAWL_MB: bodies read by one crawl, sitemaps and robots.txt included
    max_seconds: float  # RAG_WEB_MAX_CRAWL_SECONDS: from the first page asked for, the caller's time included
    allow_private: bool  # RAG_WEB_ALLOW_PRIVATE


class CrawlRefused(ApplicationError):
    """The start URL cannot be crawled: not http(s), credentials in it, a host that does not resolve or resolves to
    an address the crawl may not reach."""


def web_url_problem(url: str, *, allow_private: bool) -> str | None:
    """Why ``url`` cannot start a crawl (for the admin form), or None; resolves the host to check its addresses."""
    if (problem := url_form_problem(url)) is not None:
        return problem
    start = normalise_url(url)
    if start is None:
        return "not a URL that can be crawled"
    scope = Scope.of(start)
    try:
        checked_addresses(scope.host, scope.port, allow_private=allow_private)
    except AddressRefused as error:
        return str(error)
    return None


def crawl(
    start_url: str, *, known: Mapping[str, Validators], limits: CrawlLimits, user_agent: str = "rag-site"
) -> Iterator[Page]:
    """The pages of the site under ``start_url``, one ``Page`` per URL, breadth-first.

    Scope: the start URL's origin and directory. A start URL ending in ``.xml`` is a sitemap whose pages seed the
    crawl; otherwise the start page does, with the pages of the sitemaps robots.txt declares (or of
    ``/sitemap.xml``). URLs in ``known`` that no link reached are visited last, so a page removed from the site is
    reported ``gone`` even when nothing links to it any more. The last page is a ``skipped`` note whose reason
    starts with "limit reached" when a limit ended the crawl early.

    Raises CrawlRefused at once (before any request) when the start URL may not be crawled.
    """
    problem = url_form_problem(start_url)
    start = normalise_url(start_url)
    if problem is not None or start is None:
        raise CrawlRefused(problem or "not a URL that can be crawled", details={"url": start_url})
    fetcher = Fetcher(user_agent=user_agent, allow_private=limits.allow_private)
    scope = Scope.of(start)
    try:
        fetcher.addresses(scope.host, scope.port)
    except AddressRefused as error:
        raise CrawlRefused(str(error), details={"url": start_url}) from error
    return _Crawl(start=start, scope=scope, known=known, limits=limits, fetcher=fetcher).pages()


def is_sitemap_url(url: str) -> bool:
    path = url.partition("?")[0].lower()
    return path.endswith((".xml", ".xml.gz"))


class _Crawl:
    def __init__(
        self, *, start: str, scope: Scope, known: Mapping[str, Validators], limits: CrawlLimits, fetcher: Fetcher
    ) -> None:
        self.start = start
        self.scope = scope
        self.known = known
        self.limits = limits
        self.fetcher = fetcher
        self.deadline = 0.0
        self.requests = 0
        self.last_request = 0.0  # time.monotonic() of the last page request
        self.total_bytes = 0
        self.seen: set[str] = set()
        self.queue: deque[str] = deque()

    def pages(self) -> Iterator[Page]:
        try:
            yield from self._pages()
        finally:  # also when the caller stops early: the generator is closed
            self.fetcher.close()

    def _pages(self) -> Iterator[Page]:
        self.deadline = time.monotonic() + self.limits.max_seconds
        robots = self._robots()
        if is_sitemap_url(self.start):
            seeds, notes = self._sitemap_pages([self.start], robots)
        else:
            listed = (normalise_url(url) for url in robots.sitemaps)
            declared = [url for url in listed if url is not None and self.scope.same_origin(url)]
            guessed = [] if declared else [f"{self.scope.origin}/sitemap.xml"]
            seeds, notes = self._sitemap_pages(declared, robots, guessed=guessed)
            seeds = [self.start, *seeds]
        yield from notes
        self._enqueue(seeds)
        # Known pages no link reaches any more: visited last, to learn whether they are gone.
        leftovers = sorted(url for url in self.known if self.scope.contains(url))
        while True:
            if not self.queue:
                self._enqueue(leftovers)
                leftovers = []
                if not self.queue:
                    return
            url = self.queue.popleft()
            if (limit := self._limit_reached()) is not None:
                yield Page(url=url, status=SKIPPED, reason=limit)
                return
            if not robots.allows(url):
                yield Page(url=url, status=SKIPPED, reason=robots.reason)
                continue
            self._wait(robots.delay)
            page = self._visit(url)
            if page is None:
                continue
            yield page
            if page.reason.startswith("limit reached"):
                return
            self._enqueue(page.links)

    def _wait(self, delay: float) -> None:
        """Keep robots.txt's Crawl-delay between page requests (the crawl's time limit still ends a slow crawl)."""
        if delay and self.last_request:
            time.sleep(max(0.0, min(self.last_request + delay, self.deadline) - time.monotonic()))
        self.last_request = time.monotonic()

    def _enqueue(self, urls: Iterable[str]) -> None:
        for url in urls:
            if url not in self.seen and self.scope.contains(url):
                self.seen.add(url)
                self.queue.append(url)

    def _limit_reached(self) -> str | None:
        if self.requests >= self.limits.max_pages:
            return f"limit reached: {self.limits.max_pages} pages (RAG_WEB_MAX_PAGES)"
        if self.total_bytes >= self.limits.max_total_bytes:
            return self._bytes_limit()
        if time.monotonic() >= self.deadline:
            return self._time_limit()
        return None

    def _bytes_limit(self) -> str:
        return f"limit reached: {self.limits.max_total_bytes} bytes read (RAG_WEB_MAX_CRAWL_MB)"

    def _time_limit(self) -> str:
        return f"limit reached: {self.limits.max_seconds:g} seconds (RAG_WEB_MAX_CRAWL_SECONDS)"

    def _conditional(self, url: str) -> dict[str, str]:
        validators = self.known.get(url)
        headers = {}
        if validators is not None and validators.etag:
            headers["If-None-Match"] = validators.etag
        if validators is not None and validators.last_modified:
            headers["If-Modified-Since"] = validators.last_modified
        return headers

    def _get(self, url: str, *, max_bytes: int, truncate: bool = False) -> Response:
        """A GET of robots.txt or a sitemap: anywhere on the origin, no validators, any media type."""
        budget = max(0, min(max_bytes, self.limits.max_total_bytes - self.total_bytes))
        want = Want(max_bytes=budget, deadline=self.deadline, truncate=truncate)
        response = self.fetcher.get(url, allowed=self.scope.same_origin, headers_for=lambda _url: {}, want=want)
        self.total_bytes += len(response.body)
        return response

    def _robots(self) -> Robots:
        response = self._get(f"{self.scope.origin}/robots.txt", max_bytes=MAX_ROBOTS_BYTES, truncate=True)
        status = 0 if response.problem and not 300 <= response.status < 400 else response.status
        return robots_from_response(
            status=status, body=response.body, user_agent=self.fetcher.user_agent, problem=response.problem
        )

    def _sitemap_pages(
        self, named: list[str], robots: Robots, *, guessed: Iterable[str] = ()
    ) -> tuple[list[str], list[Page]]:
        """The in-scope pages the sitemaps list (indexes followed, at most MAX_SITEMAPS files), and a skipped note
        for each named sitemap that could not be read (a guessed /sitemap.xml that is missing is no news)."""
        pending = deque([(url, True) for url in named] + [(url, False) for url in guessed])
        done: set[str] = set()
        pages: list[str] = []
        notes: list[Page] = []
        while pending and len(done) < MAX_SITEMAPS:
            url, is_named = pending.popleft()
            if url in done:
                continue
            done.add(url)
            if not robots.allows(url):
                if is_named:
                    notes.append(Page(url=url, status=SKIPPED, reason=robots.reason))
                continue
            if self._limit_reached() is not None:
                break
            response = self._get(url, max_bytes=MAX_SITEMAP_BYTES)
            problem = response.problem or ("" if response.status == 200 else f"HTTP {response.status}")
            sitemap = sitemap_parse(response.body, url=response.url) if not problem else None
            if sitemap is not None and sitemap.problem:
                problem = sitemap.problem
            if sitemap is None or problem:
                if is_named:
                    notes.append(Page(url=url, status=SKIPPED, reason=f"sitemap not read: {problem}"))
                continue
            pages.extend(page for page in sitemap.pages if self.scope.contains(page))
            pending.extend((child, True) for child in sitemap.sitemaps if self.scope.same_origin(child))
        return pages, notes

    def _visit(self, url: str) -> Page | None:
        """One page's GET and what it means; None when it redirected to a page this crawl already has."""
        self.requests += 1
        limits = self.limits
        budget = min(limits.max_page_bytes, limits.max_total_bytes - self.total_bytes)
        want = Want(max_bytes=budget, deadline=self.deadline, accept_types=TEXT_TYPES)
        response = self.fetcher.get(url, allowed=self.scope.contains, headers_for=self._conditional, want=want)
        if response.url != url:
            if response.url in self.seen:
                return None
            self.seen.add(response.url)
            url = response.url
        if response.timed_out and time.monotonic() >= self.deadline:
            return Page(url=url, status=SKIPPED, reason=self._time_limit())
        if response.too_large:
            too_large = f"too large (over {limits.max_page_bytes} bytes)"
            reason = self._bytes_limit() if budget < limits.max_page_bytes else too_large
            return Page(url=url, status=SKIPPED, content_type=response.content_type, reason=reason)
        if response.problem:
            return Page(url=url, status=SKIPPED, content_type=response.content_type, reason=response.problem)
        if response.status == 200:
            self.total_bytes += len(response.body)
            links: tuple[str, ...] = ()
            if response.content_type in HTML_TYPES:
                found = page_links(response.body, url=url, charset=response.charset)
                links = tuple(link for link in found if self.scope.contains(link))
            return Page(
                url=url,
                status=FETCHED,
                body=response.body,
                content_type=response.content_type,
                etag=response.etag,
                last_modified=response.last_modified,
                links=links,
                charset=response.charset,
            )
        if response.status == 304 and (stored := self.known.get(url)) is not None:
            return Page(
                url=url,
                status=UNCHANGED,
                etag=response.etag or stored.etag,
                last_modified=response.last_modified or stored.last_modified,
                links=tuple(link for link in stored.links if self.scope.contains(link)),
            )
        if response.status in (404, 410):
            return Page(url=url, status=GONE)
        return Page(url=url, status=SKIPPED, reason=f"HTTP {response.status}")
