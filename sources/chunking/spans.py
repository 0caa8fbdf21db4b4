"""Definitions found by a parser become spans; the gaps between them too.

Every strategy that understands structure (Python's ast, tree-sitter, data
keys) reports the line spans of what it found; ``spans_fill`` adds the code
in between, so no line of the file is lost, and ``spans_chunk`` windows any
span that is too large while keeping its symbol.
"""

from dataclasses import dataclass, field

from sources.chunking.types import ChunkResult
from sources.chunking.window import Lines, window_chunks


@dataclass(slots=True)
class Span:
    start: int  # 0-based line, inclusive
    end: int  # exclusive
    symbol: str = ""
    metadata: dict = field(default_factory=dict)


def comment_start(lines: Lines, start: int, floor: int, markers: tuple[str, ...]) -> int:
    """Extend ``start`` upwards over the comment block directly above it."""
    while start - 1 >= floor:
        above = lines.items[start - 1].strip()
        if not above or not above.startswith(markers):
            break
        start -= 1
    return start


def spans_fill(found: list[Span], start: int, end: int, *, gap_symbol: str = "") -> list[Span]:
    """Sorted, non-overlapping spans covering [start, end): ``found`` plus the gaps."""
    result: list[Span] = []
    cursor = start
    for span in sorted(found, key=lambda s: s.start):
        span_start = max(span.start, cursor)
        if span.end <= span_start:
            continue  # nested in or overlapped by the previous span
        if span_start > cursor:
            result.append(Span(cursor, span_start, gap_symbol))
        result.append(Span(span_start, min(span.end, end), span.symbol, span.metadata))
        cursor = min(span.end, end)
    if cursor < end:
        result.append(Span(cursor, end, gap_symbol))
    return result


def spans_chunk(
    lines: Lines, spans: list[Span], *, max_chars: int, overlap: int, language: str, context_prefix: str = ""
) -> list[ChunkResult]:
    chunks: list[ChunkResult] = []
    for span in spans:
        chunks.extend(
            window_chunks(
                lines,
                span.start,
                span.end,
                max_chars=max_chars,
                overlap=overlap,
                language=language,
                symbol=span.symbol,
                context_prefix=context_prefix,
                metadata=span.metadata,
            )
        )
    return chunks
