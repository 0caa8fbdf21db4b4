"""PDF: the text layer of each page, one anchor per page ("p. 3"), with pypdf (BSD, pure Python)."""

import io
import logging
import re

from sources.extract.types import Extracted, ExtractionRefused, Limits, TextBuilder

_BULLET = re.compile(r"^\s*[•◦▪‣●○■□–]\s+")


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
        for number, page in enumerate(reader.pages, start=1):
            builder.anchored(f"p. {number}", [_page_markdown(page.extract_text() or "")])
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
