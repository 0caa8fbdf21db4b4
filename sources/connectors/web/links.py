"""The links of an HTML page a crawl follows: ``<a href>``, ``<area href>`` and ``<link rel=next>``.

Only the links: the text is extracted later by the indexing pipeline's HTML extractor. html.parser is lenient
enough for real pages and never fetches anything a page names.
"""

from html.parser import HTMLParser

from sources.connectors.web.scope import normalise_url

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


class _LinkParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.base = ""
        self.hrefs: list[str] = []
        self.nofollow = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        href = values.get("href", "")
        if tag == "base" and href and not self.base:
            self.base = href  # the first <base href> counts, as in browsers
        elif tag in ("a", "area") and href:
            self.hrefs.append(href)
        elif tag == "link" and href and "next" in values.get("rel", "").lower().split():
            self.hrefs.append(href)
        elif tag == "meta" and values.get("name", "").lower() == "robots":
            # <meta name="robots" content="nofollow">: the author asks crawlers not to follow this page's links.
            self.nofollow |= "nofollow" in values.get("content", "").lower().replace(",", " ").split()


def decode(body: bytes, charset: str) -> str:
    """The body as text in the charset its Content-Type names (UTF-8 when it names none or an unknown one)."""
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:
        return body.decode("utf-8", errors="replace")


def page_links(body: bytes, *, url: str, charset: str = "") -> tuple[str, ...]:
    """The normalised absolute http(s) links of an HTML page at ``url``, each once, in the page's order.

    Fragments are dropped (``#section`` is the same page), mailto:, javascript: and other schemes are left out.
    """
    parser = _LinkParser()
    parser.feed(decode(body, charset))
    parser.close()
    if parser.nofollow:
        return ()
    base = (normalise_url(parser.base, base=url) or url) if parser.base else url
    found: dict[str, None] = {}
    for href in parser.hrefs:
        if href.lstrip().startswith("#"):
            continue  # a place on this very page
        if (link := normalise_url(href, base=base)) is not None:
            found.setdefault(link, None)
    return tuple(found)
