"""Run one extractor on bytes, in whatever process calls it (the child of sandbox.py)."""

from sources.extract.types import Extracted, ExtractionRefused, Limits


def extract_kind(kind: str, data: bytes, limits: Limits) -> Extracted:
    if kind == "pdf":
        from sources.extract.pdf import pdf_extract

        return pdf_extract(data, limits)
    if kind in ("docx", "pptx", "xlsx"):
        from sources.extract import office

        return {"docx": office.docx_extract, "pptx": office.pptx_extract, "xlsx": office.xlsx_extract}[kind](
            data, limits
        )
    if kind in ("csv", "tsv"):
        from sources.extract.tabular import delimited_extract

        return delimited_extract(data, limits, delimiter="," if kind == "csv" else "\t")
    if kind == "html":
        from sources.extract.html import html_extract

        return html_extract(data, limits)
    raise ExtractionRefused(f"no extractor for {kind!r}")
