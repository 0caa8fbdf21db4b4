"""The links of an HTML page a crawl follows: ``<a href>``, ``<area href>`` and ``<link rel=next>``.

Only the links: the text is extracted later by the indexing pipeline's HTML extractor. html.parser is lenient
enough for real pages and never fetches anything a page names, but it is slow on a whole page (pure Python, a
call per tag): the Python documentation's 50 MB took 26 s to crawl, 85% of it in the parser. So the few tags
that matter are cut out first, in one pass that skips comments, scripts and styles (where a "<a" is no tag),
and only they are parsed. The pass is linear in the page: no pattern there can backtrack over the rest of a page,
which a hostile page (thousands of unclosed "<a") would turn into minutes.
"""

import codecs
import re
from collections.abc import Iterator
from html.parser import HTMLParser

from sources.connectors.web.scope import normalise_url

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})

# What opens a tag that matters, or a stretch where no tag counts (a comment, a script, a style).
_OPENING = re.compile(r"<!--|<(script|style)\b|<(?:a|area|link|base|meta)\b", re.IGNORECASE)
_CLOSING = {
    "script": re.compile(r"</script\s*>", re.IGNORECASE),
    "style": re.compile(r"</style\s*>", re.IGNORECASE),
}
# A quoted attribute value may hold ">": a tag cut there is extended to the next ">" this many times at most.
_MAX_EXTENSIONS = 8


def _link_tags(text: str) -> Iterator[str]:
    """The start tags of <a>, <area>, <link>, <base> and <meta> outside comments, scripts and styles."""
    position = 0
    while (found := _OPENING.search(text, position)) is not None:
        if found.group(0) == "<!--":
            end = text.find("-->", found.end())
            position = len(text) if end < 0 else end + 3  # an unclosed comment runs to the end, as in browsers
        elif found.group(1):
            closing = _CLOSING[found.group(1).lower()].search(text, found.end())
            position = len(text) if closing is None else closing.end()
        else:
            end = text.find(">", found.end())
            for _ in range(_MAX_EXTENSIONS):
                if end < 0 or text.count('"', found.start(), end) % 2 == 0:
                    break
                end = text.find(">", end + 1)
            if end < 0:
                return
            yield text[found.start() : end + 1]
            position = end + 1


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


# <meta charset="..."> or <meta http-equiv="Content-Type" content="text/html; charset=...">, within the first bytes
# of the page as HTML says to look for it (the "prescan" reads 1,024 bytes).
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)
_PRESCAN_BYTES = 1024


def page_charset(body: bytes, *, header: str, html: bool) -> str:
    """The page's character encoding as a browser finds it: a byte order mark, then the Content-Type's charset, then
    (HTML) a <meta> charset in its first 1,024 bytes; "utf-8" when none names a known one."""
    for mark, name in ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")):
        if body.startswith(mark):
            return name
    declared = [header]
    if html and (found := _META_CHARSET.search(body[:_PRESCAN_BYTES])):
        declared.append(found.group(1).decode("ascii"))
    for name in declared:
        try:
            known = codecs.lookup(name).name if name else ""
        except LookupError:
            continue
        if known:
            # As browsers do (the WHATWG Encoding standard): a page labelled Latin-1 or ASCII is read as Windows-1252.
            return "cp1252" if known in ("latin-1", "iso8859-1", "ascii") else known
    return "utf-8"


def utf8_body(body: bytes, *, header: str, html: bool) -> bytes:
    """The body in UTF-8, which every reader expects (a page in Latin-1 or Windows-1252 is common on the web)."""
    charset = page_charset(body, header=header, html=html) or "utf-8"
    if charset == "utf-8":
        return body
    text = body.decode(charset, errors="replace").lstrip("\ufeff")
    return text.encode("utf-8")


def page_links(body: bytes, *, url: str, charset: str = "") -> tuple[str, ...]:
    """The normalised absolute http(s) links of an HTML page at ``url``, each once, in the page's order.

    Fragments are dropped (``#section`` is the same page), mailto:, javascript: and other schemes are left out.
    """
    parser = _LinkParser()
    parser.feed("\n".join(_link_tags(decode(body, charset))))
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
