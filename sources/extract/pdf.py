"""PDF: the text layer of each page, one anchor per page ("p. 3"), with pypdf (BSD, pure Python).

A page that draws ruled lines may hold a table: that page alone is read
again with pdfplumber (MIT), whose tables come out as markdown tables in
their place among the page's lines. pypdf reads a table as its cells run
together ("North 1200 40"), which neither a reader nor a chunk can tell
from prose. pdfplumber is about ten times slower per page, so pages that
draw no line never reach it (a table without rules is not one its line
strategy finds anyway).
"""

import io
import logging
import re
from typing import TYPE_CHECKING

from sources.extract.office import table_blocks
from sources.extract.types import Extracted, ExtractionRefused, Limits, TextBuilder

if TYPE_CHECKING:
    from pdfplumber.pdf import PDF

_BULLET = re.compile(r"^\s*[•◦▪‣●○■□–]\s+")
# Path operators that draw rules: a rectangle ("re") or a line ("l"), then stroked. A cheap test on the raw content
# stream that decides which pages pdfplumber looks at; a false positive only costs time.
_RULES = re.compile(rb"(?:^|\s)(?:re|l)\s")


def pdf_extract(data: bytes, limits: Limits) -> Extracted:
    import pypdf  # imported in the child process only: the parent never parses a hostile file
    from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # every recoverable oddity would be a warning per page
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            # Many PDFs are "encrypted" with an empty password only to forbid printing; those read fine.
            try:
                opened = reader.decrypt("")
            except (DependencyError, NotImplementedError) as exc:
                raise ExtractionRefused(f"encrypted PDF ({exc})") from None
            if not opened:
                raise ExtractionRefused("encrypted PDF: needs a password")
        count = len(reader.pages)
        if count > limits.max_pages:
            raise ExtractionRefused(f"{count:,} pages, over the limit of {limits.max_pages:,} (RAG_EXTRACT_MAX_PAGES)")
        builder = TextBuilder()
        with _Tables(data) as tables:
            for number, page in enumerate(reader.pages, start=1):
                blocks = tables.page_blocks(number - 1) if _draws_rules(page) else None
                builder.anchored(f"p. {number}", blocks or [_page_markdown(page.extract_text() or "")])
    except FileNotDecryptedError:
        raise ExtractionRefused("encrypted PDF: needs a password") from None
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, AssertionError) as exc:
        raise ExtractionRefused(f"unreadable PDF: {type(exc).__name__}: {exc}"[:300]) from None
    if not builder.anchors:
        raise ExtractionRefused(f"no text layer: needs OCR ({count} pages, none with text)")
    return builder.result()


def _page_markdown(text: str) -> str:
    lines = [_BULLET.sub("- ", line) for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return "\n".join(line for line in lines if line.strip())


def _draws_rules(page) -> bool:
    try:
        contents = page.get_contents()
    except Exception:  # a broken stream: pypdf's own read of the page says what is wrong, or reads what it can
        return False
    return contents is not None and _RULES.search(contents.get_data()) is not None


class _Tables:
    """pdfplumber over the same bytes, opened at the first page that may hold a table, closed with the reading."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pdf: PDF | None = None

    def __enter__(self) -> "_Tables":
        return self

    def __exit__(self, *exc) -> None:
        if self._pdf is not None:
            self._pdf.close()

    def page_blocks(self, index: int) -> list[str] | None:
        """The page's lines and tables as blocks, top to bottom; None when pdfplumber finds no table (or cannot
        read the page: pypdf's text stands)."""
        try:
            if self._pdf is None:
                import pdfplumber  # in the child process only, and only for a PDF that draws rules

                logging.getLogger("pdfminer").setLevel(logging.ERROR)
                self._pdf = pdfplumber.open(io.BytesIO(self._data))
            page = self._pdf.pages[index]
            found = page.find_tables()
            if not found:
                return None
            outside = page
            for table in found:
                outside = outside.outside_bbox(table.bbox)
            # The lines between two tables are one block, placed by its first line.
            runs: dict[int, list[dict]] = {}
            for line in outside.extract_text_lines():
                runs.setdefault(sum(table.bbox[1] < line["top"] for table in found), []).append(line)
            placed = [(run[0]["top"], _page_markdown("\n".join(line["text"] for line in run))) for run in runs.values()]
            for table in found:
                rows = [[cell or "" for cell in row] for row in table.extract() if any(row)]
                placed.extend((table.bbox[1], block) for block in table_blocks(rows))
        except MemoryError:
            raise  # the sandbox's limit: reported as such, not hidden behind pypdf's text
        except Exception:  # pdfplumber is the second reader; whatever else it chokes on, pypdf's text stands
            return None
        return [block for _, block in sorted(placed, key=lambda item: item[0]) if block.strip()]
