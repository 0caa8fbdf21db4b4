"""Boundary-aware sliding window over line ranges; the fallback of every strategy.

A chunk is always whole lines ``start..end`` of the input, except inside one
line longer than ``max_chars``: that line is cut into character windows
whose offsets are in ``metadata`` (``char_start``, ``char_end``). A window
ends at a paragraph break, else at a sentence end, found within its last
20%; else it cuts hard. The overlap start snaps to such a boundary too.
"""

import re
from itertools import accumulate
from typing import TypedDict

from sources.chunking.types import ChunkResult

# Where to look for a boundary: the last 20% of a full window.
SNAP_FRACTION = 0.2
_SENTENCE_END = (".", "!", "?", ":", ";", "。", "！", "？")
_IN_LINE_SENTENCE = re.compile(r"[.!?。！？][\"')\]]*\s")
_IN_LINE_SPACE = re.compile(r"\s")


class _Labels(TypedDict):
    """What every chunk of one span carries besides its lines."""

    language: str
    symbol: str
    context_prefix: str
    metadata: dict | None


class Lines:
    """The input split on "\\n" only (so CRLF keeps its "\\r"), with O(1) range sizes."""

    __slots__ = ("items", "_prefix")

    def __init__(self, text: str) -> None:
        self.items = text.split("\n")
        self._prefix = [0, *accumulate(len(line) + 1 for line in self.items)]

    def __len__(self) -> int:
        return len(self.items)

    def size(self, start: int, end: int) -> int:
        """Characters of lines [start, end) joined with newlines."""
        return self._prefix[end] - self._prefix[start] - 1 if end > start else 0

    def blank(self, index: int) -> bool:
        return not self.items[index].strip()

    def text(self, start: int, end: int) -> str:
        return "\n".join(self.items[start:end])


def span_chunk(
    lines: Lines,
    start: int,
    end: int,
    *,
    language: str,
    symbol: str = "",
    context_prefix: str = "",
    metadata: dict | None = None,
) -> ChunkResult | None:
    """Lines [start, end) as one chunk, blank edge lines trimmed; None if all blank."""
    while start < end and lines.blank(start):
        start += 1
    while end > start and lines.blank(end - 1):
        end -= 1
    if start >= end:
        return None
    return ChunkResult(
        content=lines.text(start, end),
        context_prefix=context_prefix,
        language=language,
        symbol=symbol,
        start_line=start + 1,
        end_line=end,
        metadata=dict(metadata or {}),
    )


def window_chunks(
    lines: Lines,
    start: int,
    end: int,
    *,
    max_chars: int,
    overlap: int,
    language: str,
    symbol: str = "",
    context_prefix: str = "",
    metadata: dict | None = None,
) -> list[ChunkResult]:
    """Chunks covering every non-blank line of [start, end), none over ``max_chars``."""
    common: _Labels = {"language": language, "symbol": symbol, "context_prefix": context_prefix, "metadata": metadata}
    if lines.size(start, end) <= max_chars:
        chunk = span_chunk(lines, start, end, **common)
        return [chunk] if chunk else []
    chunks: list[ChunkResult] = []
    position = start
    while position < end:
        while position < end and lines.blank(position):
            position += 1
        if position >= end:
            break
        if len(lines.items[position]) > max_chars:
            chunks.extend(_line_windows(lines, position, max_chars=max_chars, overlap=overlap, **common))
            position += 1
            continue
        stop = position + 1
        while stop < end and len(lines.items[stop]) <= max_chars and lines.size(position, stop + 1) <= max_chars:
            stop += 1
        if stop < end and len(lines.items[stop]) <= max_chars:
            stop = _snap_end(lines, position, stop, max_chars)
        chunk = span_chunk(lines, position, stop, **common)
        if chunk:
            chunks.append(chunk)
        if stop >= end:
            break
        position = _overlap_start(lines, position, stop, overlap)
    return chunks


def _snap_end(lines: Lines, start: int, stop: int, max_chars: int) -> int:
    """The best cut in (start, stop]: a paragraph break, else a sentence end, else stop."""
    floor = lines.size(start, start) + max_chars * (1 - SNAP_FRACTION)
    sentence = None
    for cut in range(stop, start, -1):
        if lines.size(start, cut) < floor:
            break
        if cut < len(lines) and lines.blank(cut):
            return cut
        if sentence is None and lines.items[cut - 1].rstrip().endswith(_SENTENCE_END):
            sentence = cut
    return sentence or stop


def _overlap_start(lines: Lines, start: int, stop: int, overlap: int) -> int:
    """Where the next window starts: up to ``overlap`` characters back, at a boundary."""
    earliest = stop
    while earliest - 1 > start and lines.size(earliest - 1, stop) <= overlap:
        earliest -= 1
    if earliest == stop:
        return stop
    for candidate in range(earliest, stop):
        previous = lines.items[candidate - 1]
        if not previous.strip() or previous.rstrip().endswith(_SENTENCE_END):
            return candidate
    return earliest


def _line_windows(lines: Lines, index: int, *, max_chars: int, overlap: int, **common) -> list[ChunkResult]:
    """Character windows over one line longer than ``max_chars``."""
    line = lines.items[index]
    metadata = common.pop("metadata") or {}
    chunks = []
    position = 0
    while position < len(line):
        stop = min(position + max_chars, len(line))
        if stop < len(line):
            stop = _snap_in_line(line, position + int(max_chars * (1 - SNAP_FRACTION)), stop)
        if line[position:stop].strip():
            chunks.append(
                ChunkResult(
                    content=line[position:stop],
                    start_line=index + 1,
                    end_line=index + 1,
                    metadata={**metadata, "char_start": position, "char_end": stop},
                    **common,
                )
            )
        if stop >= len(line):
            break
        position = max(_overlap_in_line(line, stop - overlap, stop), position + 1)
    return chunks


def _snap_in_line(line: str, low: int, high: int) -> int:
    window = line[low:high]
    for pattern in (_IN_LINE_SENTENCE, _IN_LINE_SPACE):
        last = None
        for match in pattern.finditer(window):
            last = match
        if last is not None:
            return low + last.end()
    return high


def _overlap_in_line(line: str, low: int, stop: int) -> int:
    if low <= 0 or low >= stop:
        return stop
    found = _IN_LINE_SENTENCE.search(line, low, stop) or _IN_LINE_SPACE.search(line, low, stop)
    return found.end() if found else low
