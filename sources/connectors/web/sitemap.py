"""Sitemaps (sitemaps.org): the page URLs a ``<urlset>`` lists and the sitemaps a ``<sitemapindex>`` names.

A sitemap comes from the site being crawled, so it is read defensively: a document type declaration (the door to
entity expansion) is refused, a gzip file is inflated only up to the byte limit, and the caller bounds how many
sitemaps it follows.
"""

import zlib
from dataclasses import dataclass
from xml.etree import ElementTree

from sources.connectors.web.scope import normalise_url

# The protocol's own limit on one sitemap (uncompressed), and how many sitemap files one crawl reads.
MAX_SITEMAP_BYTES = 50 * 1024 * 1024
MAX_SITEMAPS = 50


@dataclass(frozen=True, slots=True)
class Sitemap:
    pages: tuple[str, ...] = ()  # normalised page URLs (<urlset>, or a text sitemap's lines)
    sitemaps: tuple[str, ...] = ()  # normalised sitemap URLs (<sitemapindex>)
    problem: str = ""  # why nothing could be read


def _inflate(body: bytes, limit: int) -> bytes | None:
    """A gzip body inflated, or None when it is larger than ``limit`` or not gzip after all."""
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(body, limit + 1)
    except zlib.error:
        return None
    return None if len(data) > limit else data


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]  # "{http://www.sitemaps.org/schemas/sitemap/0.9}loc" -> "loc"


def sitemap_parse(body: bytes, *, url: str, limit: int = MAX_SITEMAP_BYTES) -> Sitemap:
    """The URLs the sitemap at ``url`` lists, resolved against it and normalised (scope is the caller's)."""
    if body[:2] == b"\x1f\x8b":
        inflated = _inflate(body, limit)
        if inflated is None:
            return Sitemap(problem="a gzip sitemap that is broken or inflates past the limit")
        body = inflated
    text = body.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text.startswith(b"<"):
        # A text sitemap: one URL a line.
        lines = text.decode("utf-8", errors="replace").splitlines()
        return Sitemap(pages=_urls(lines, url))
    if b"<!DOCTYPE" in text.upper():
        return Sitemap(problem="a sitemap with a document type declaration is not read")
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as error:
        return Sitemap(problem=f"not a valid sitemap: {error}")
    locs = [element.text or "" for element in root.iter() if _local(element.tag) == "loc"]
    if _local(root.tag) == "sitemapindex":
        return Sitemap(sitemaps=_urls(locs, url))
    return Sitemap(pages=_urls(locs, url))


def _urls(values: list[str], base: str) -> tuple[str, ...]:
    found: dict[str, None] = {}
    for value in values:
        if value.strip() and (link := normalise_url(value, base=base)) is not None:
            found.setdefault(link, None)
    return tuple(found)
