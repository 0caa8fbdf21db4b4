"""CSV and TSV with the standard library: markdown tables in blocks, each headed by the header row."""

import csv
import io

from sources.extract.office import table_blocks
from sources.extract.types import Extracted, ExtractionRefused, Limits, TextBuilder


def delimited_extract(data: bytes, limits: Limits, *, delimiter: str) -> Extracted:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ExtractionRefused(f"not valid UTF-8 (byte {exc.start})") from None
    csv.field_size_limit(1_000_000)  # a quote never closed would otherwise swallow the file into one field
    try:
        rows = [row for row in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter) if any(row)]
    except csv.Error as exc:
        raise ExtractionRefused(f"unreadable table: {exc}") from None
    builder = TextBuilder()
    for block in table_blocks(rows):
        builder.block(block)
    if not builder.lines:
        raise ExtractionRefused("no rows")
    return builder.result()
