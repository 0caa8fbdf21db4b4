"""Web roots: the crawler (``crawl.crawl``) as a connector of the one pipeline.

An item is a page: its path is its URL (cited as such), its marker what the
next crawl's conditional GET needs (``Validators``: ETag, Last-Modified and
the page's links, so a 304 page still leads the crawl on) with its content
type (which picks the reader: HTML pages go through the HTML extractor) and
its body's hash. A page answered 304 is listed with its stored marker and
never read; a page gone (404, 410) is not listed, so the pipeline deletes
it; a page disallowed by robots.txt is skipped (and deleted). A page the
crawl could not reach this time (a server error, a limit reached) keeps
what is stored.

The pipeline lists every item before it reads one, so fetched bodies wait
in memory until read: at most RAG_WEB_MAX_CRAWL_MB of them per crawl.
"""

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence

from sources.config import IndexingConfig, web_limits
from sources.connectors.base import KEPT, Connector, Item, Skipped
from sources.connectors.web.crawl import FETCHED, GONE, SKIPPED, UNCHANGED, CrawlLimits, Page, Validators, crawl
from sources.connectors.web.links import HTML_TYPES, utf8_body
from sources.connectors.web.robots import DISALLOWED
from sources.models import IndexJob, WorkspaceRoot

# IndexedFile.path and Chunk.path hold this much.
MAX_URL_LENGTH = 1024


class WebConnector(Connector):
    kind = "web"

    @classmethod
    def claims(cls, root: WorkspaceRoot) -> bool:
        return bool(root.web_url)

    def __init__(
        self, *, root: WorkspaceRoot, job: IndexJob, config: IndexingConfig, limits: CrawlLimits | None = None
    ) -> None:
        super().__init__(root=root, job=job, config=config)
        self.limits = limits or web_limits()
        self.pages: dict[str, Page] = {}  # fetched this crawl, until read
        self.counts = {FETCHED: 0, UNCHANGED: 0, GONE: 0}

    def targeted(self) -> bool:
        return False  # a crawl follows links from the start: it cannot read a few pages alone

    def items(self, *, paths: Sequence[str], known: Mapping[str, str]) -> Iterator[Item | Skipped]:
        validators = {url: _validators(marker) for url, marker in known.items()}
        seen: set[str] = set()
        cut_short = False
        for page in crawl(self.root.web_url, known=validators, limits=self.limits):
            seen.add(page.url)
            if page.status in self.counts:
                self.counts[page.status] += 1
            if page.status == GONE:
                continue  # not listed: the pipeline deletes what it stored
            if len(page.url) > MAX_URL_LENGTH:
                yield Skipped(page.url[:MAX_URL_LENGTH], f"URL longer than {MAX_URL_LENGTH} characters")
            elif page.status == FETCHED:
                self.pages[page.url] = page
                yield Item(page.url, size=len(page.body), marker=_marker(page))
            elif page.status == UNCHANGED or (page.url in known and page.reason != DISALLOWED):
                # Not modified, or not reachable this time (a server error, a limit): what is stored stays.
                yield Item(page.url, marker=known[page.url])
            else:
                yield Skipped(page.url, page.reason)
            cut_short = page.status == SKIPPED and page.reason.startswith("limit reached")
        if cut_short:
            # Pages the crawl never came to are not gone: the next crawl reads them.
            yield from (Item(url, marker=marker) for url, marker in known.items() if url not in seen)

    def reader_name(self, path: str, marker: str) -> str:
        content_type = json.loads(marker).get("type", "") if marker else ""
        if content_type in HTML_TYPES:
            return "page.html"
        return "page.md" if content_type in ("text/markdown", "text/x-markdown") else "page.txt"

    def read(self, item: Item) -> bytes | Skipped:
        page = self.pages.pop(item.path, None)
        if page is None:
            return Skipped(item.path, KEPT)
        # Read in the page's own encoding (its Content-Type, or a <meta> charset): every reader expects UTF-8.
        return utf8_body(page.body, header=page.charset, html=page.content_type in HTML_TYPES)

    def summary(self) -> str:
        counts = self.counts
        return (
            f"crawled {sum(counts.values())} page(s): {counts[FETCHED]} fetched, {counts[UNCHANGED]} not modified, "
            f"{counts[GONE]} gone; "
        )


def _marker(page: Page) -> str:
    """What the next crawl needs of a fetched page, and what says whether it changed."""
    return json.dumps(
        {
            "etag": page.etag,
            "last_modified": page.last_modified,
            "links": list(page.links),
            "type": page.content_type,
            "sha256": hashlib.sha256(page.body).hexdigest(),
        },
        sort_keys=True,
    )


def _validators(marker: str) -> Validators:
    stored = json.loads(marker)
    return Validators(
        etag=stored.get("etag", ""), last_modified=stored.get("last_modified", ""), links=tuple(stored.get("links", ()))
    )
