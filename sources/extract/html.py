"""HTML with the standard library's parser: headings, paragraphs, lists and tables as markdown.

Only whole documents are extracted (a doctype or an <html> element near the
start); a fragment or a template (``{% block %}`` in a Django app) stays code
and is chunked as text, as before.
"""

import re
from html.parser import HTMLParser

from sources.extract.types import Extracted, ExtractionRefused, Limits, TextBuilder, markdown_table

_DOCUMENT = re.compile(rb"<!doctype\s+html|<html[\s>]", re.IGNORECASE)
_SKIPPED = {"script", "style", "noscript", "template", "svg", "head", "nav", "footer", "iframe", "object"}
_BLOCKS = {"p", "div", "section", "article", "main", "header", "blockquote", "pre", "dd", "dt", "figcaption", "br"}


# How much of a file says whether it is a whole page: its doctype or <html> comes first.
HTML_SNIFF_BYTES = 4096


def html_document(data: bytes) -> bool:
    return bool(_DOCUMENT.search(data[:HTML_SNIFF_BYTES]))


def html_extract(data: bytes, limits: Limits) -> Extracted:
    text = data.decode("utf-8", errors="replace")
    parser = _Markdown()
    parser.feed(text)
    parser.close()
    parser.flush()
    extracted = parser.builder.result()
    if not extracted.text.strip():
        raise ExtractionRefused("no text in this HTML document")
    return extracted


class _Markdown(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.builder = TextBuilder()
        self.text: list[str] = []
        self.prefix = ""
        self.skipping = 0
        self.lists: list[str] = []  # "ul" or "ol", innermost last
        self.table: list[list[str]] | None = None
        self.cell: list[str] | None = None
        self.last_was_item = False  # list items follow each other line by line, as a tight list

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in _SKIPPED:
            self.skipping += 1
        elif self.skipping:
            return
        elif tag == "table":
            self.flush()
            self.table = []
        elif tag == "tr" and self.table is not None:
            self.table.append([])
        elif tag in ("td", "th") and self.table is not None:
            self.cell = []
        elif re.fullmatch(r"h[1-6]", tag):
            self.flush()
            self.prefix = "#" * int(tag[1]) + " "
        elif tag in ("ul", "ol"):
            self.flush()
            self.lists.append(tag)
        elif tag == "li":
            self.flush()
            indent = "  " * max(len(self.lists) - 1, 0)
            self.prefix = indent + ("1. " if self.lists and self.lists[-1] == "ol" else "- ")
        elif tag in _BLOCKS:
            self.flush()

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED:
            self.skipping = max(self.skipping - 1, 0)
        elif self.skipping:
            return
        elif tag in ("td", "th") and self.table is not None and self.cell is not None:
            if not self.table:
                self.table.append([])
            self.table[-1].append(" ".join("".join(self.cell).split()))
            self.cell = None
        elif tag == "table" and self.table is not None:
            rows = [row for row in self.table if any(cell for cell in row)]
            self.table = None
            if rows:
                self.builder.block(markdown_table(rows))
                self.last_was_item = False
        elif tag in ("ul", "ol"):
            self.flush()
            if self.lists:
                self.lists.pop()
        elif re.fullmatch(r"h[1-6]", tag) or tag == "li" or tag in _BLOCKS:
            self.flush()

    def handle_data(self, data: str) -> None:
        if self.skipping:
            return
        if self.cell is not None:
            self.cell.append(data)
        elif self.table is None:
            self.text.append(data)

    def flush(self) -> None:
        text = " ".join("".join(self.text).split())
        if text:
            # Paragraph text that starts like markdown syntax would become a heading or a list item.
            if not self.prefix and re.match(r"[#>*+-]|\d+[.)]\s", text):
                text = "\\" + text
            item = self.prefix.lstrip().startswith(("- ", "1. "))
            self.builder.block(self.prefix + text, tight=item and self.last_was_item)
            self.last_was_item = item
        self.text, self.prefix = [], ""
