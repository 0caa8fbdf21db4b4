"""Word, PowerPoint and Excel: python-docx, python-pptx and openpyxl (all MIT), after the zip-bomb guard."""

import io
import re
import zipfile
from collections.abc import Iterable, Iterator

from sources.extract.types import Extracted, ExtractionRefused, Limits, TextBuilder, markdown_table
from sources.extract.zipguard import zip_check

# A table is cut into blocks of this many rows, each with the header again: a chunk of row 900 still says what
# its columns are.
TABLE_BLOCK_ROWS = 40
# Cells read from one workbook; a sheet of a million empty-looking cells is a denial of service, not a document.
MAX_CELLS = 2_000_000
_HEADING = re.compile(r"^(?:Heading\s*(\d)|Title)$", re.IGNORECASE)

_PARSE_ERRORS = (KeyError, ValueError, TypeError, AttributeError, IndexError, zipfile.BadZipFile, SyntaxError)


def docx_extract(data: bytes, limits: Limits) -> Extracted:
    zip_check(data, limits, kind="DOCX")
    import docx
    from docx.table import Table

    try:
        document = docx.Document(io.BytesIO(data))
        builder = TextBuilder()
        for item in document.iter_inner_content():
            if isinstance(item, Table):
                builder.block(_tables([[cell.text for cell in row.cells] for row in item.rows]))
            else:
                builder.block(_paragraph(item.text, item.style.name if item.style is not None else ""))
    except _PARSE_ERRORS as exc:
        raise ExtractionRefused(f"unreadable DOCX: {type(exc).__name__}: {exc}"[:300]) from None
    return _nonempty(builder.result(), "DOCX")


def pptx_extract(data: bytes, limits: Limits) -> Extracted:
    zip_check(data, limits, kind="PPTX")
    import pptx

    try:
        presentation = pptx.Presentation(io.BytesIO(data))
        slides = list(presentation.slides)
        if len(slides) > limits.max_pages:
            raise ExtractionRefused(
                f"{len(slides):,} slides, over the limit of {limits.max_pages:,} (RAG_EXTRACT_MAX_PAGES)"
            )
        builder = TextBuilder()
        for number, slide in enumerate(slides, start=1):
            builder.anchored(f"slide {number}", list(_slide_blocks(slide)))
    except _PARSE_ERRORS as exc:
        raise ExtractionRefused(f"unreadable PPTX: {type(exc).__name__}: {exc}"[:300]) from None
    return _nonempty(builder.result(), "PPTX")


def xlsx_extract(data: bytes, limits: Limits) -> Extracted:
    zip_check(data, limits, kind="XLSX")
    import openpyxl

    try:
        # read_only streams rows; data_only reads the values Excel last computed, not the formulas.
        workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
        if len(workbook.worksheets) > limits.max_pages:
            raise ExtractionRefused(
                f"{len(workbook.worksheets):,} sheets, over the limit of {limits.max_pages:,} (RAG_EXTRACT_MAX_PAGES)"
            )
        builder, cells = TextBuilder(), 0
        for sheet in workbook.worksheets:
            rows = []
            for values in sheet.iter_rows(values_only=True):
                cells += len(values)
                if cells > MAX_CELLS:
                    raise ExtractionRefused(f"over {MAX_CELLS:,} cells")
                rows.append(["" if v is None else str(v) for v in values])
            builder.anchored(f"sheet {sheet.title}", [_tables(_trimmed(rows))])
        workbook.close()
    except _PARSE_ERRORS as exc:
        raise ExtractionRefused(f"unreadable XLSX: {type(exc).__name__}: {exc}"[:300]) from None
    return _nonempty(builder.result(), "XLSX")


def table_blocks(rows: list[list[str]]) -> Iterator[str]:
    """Markdown tables of at most TABLE_BLOCK_ROWS rows each, every one headed by the first row."""
    if not rows:
        return
    header, body = rows[0], rows[1:]
    if not body:
        yield markdown_table([header])
    for start in range(0, len(body), TABLE_BLOCK_ROWS):
        yield markdown_table([header, *body[start : start + TABLE_BLOCK_ROWS]])


def _tables(rows: list[list[str]]) -> str:
    return "\n\n".join(table_blocks(rows))


def _trimmed(rows: list[list[str]]) -> list[list[str]]:
    """Without empty rows and the empty columns at the right that spreadsheets report."""
    rows = [row for row in rows if any(cell.strip() for cell in row)]
    width = max((max((i + 1 for i, c in enumerate(row) if c.strip()), default=0) for row in rows), default=0)
    return [row[:width] for row in rows]


def _paragraph(text: str, style: str) -> str:
    text = text.strip()
    if not text:
        return ""
    heading = _HEADING.match(style)
    if heading:
        return "#" * min(int(heading.group(1) or 1), 6) + " " + " ".join(text.split())
    if style.lower().startswith("list number"):
        return f"1. {text}"
    if style.lower().startswith("list"):
        return f"- {text}"
    return text


def _slide_blocks(slide) -> Iterable[str]:
    title = slide.shapes.title
    if title is not None and title.has_text_frame and title.text_frame.text.strip():
        yield "## " + " ".join(title.text_frame.text.split())
    for shape in slide.shapes:
        if title is not None and shape.shape_id == title.shape_id:
            continue
        if getattr(shape, "has_table", False) and shape.has_table:
            yield _tables([[cell.text for cell in row.cells] for row in shape.table.rows])
        elif shape.has_text_frame:
            lines = []
            for paragraph in shape.text_frame.paragraphs:
                text = "".join(run.text for run in paragraph.runs).strip()
                if text:
                    lines.append("  " * paragraph.level + f"- {text}")
            yield "\n".join(lines)
    if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
        notes = slide.notes_slide.notes_text_frame.text.strip()
        if notes:
            yield f"Notes: {notes}"


def _nonempty(extracted: Extracted, kind: str) -> Extracted:
    if not extracted.text.strip():
        raise ExtractionRefused(f"no text in this {kind}")
    return extracted
