"""Markdown chunking by header hierarchy, on markdown-it-py's block tokens.

Each section (a heading and the lines up to the next heading) is one chunk
whose ``context_prefix`` is its heading path (``# Doc > ## Section``); text
before the first heading is a chunk of its own. Sections longer than
``max_chars`` split between top-level blocks (paragraphs, lists, fences), and
a single oversized block splits between lines. Headings inside fenced code are
not headings: the parser, not a regex, decides.
"""

from dataclasses import dataclass

from markdown_it import MarkdownIt

from sources.chunking.frontmatter import FrontMatter, front_matter_split
from sources.chunking.types import ChunkResult

_PARSER = MarkdownIt("commonmark")


@dataclass(frozen=True, slots=True)
class MarkdownDocument:
    chunks: list[ChunkResult]
    front_matter: FrontMatter


@dataclass(slots=True)
class _Section:
    start: int  # 0-based line index, inclusive
    end: int  # exclusive
    prefix: str
    heading: str


def markdown_chunk(text: str, *, max_chars: int = 1500) -> MarkdownDocument:
    """Chunk a markdown document; never raises on any ``str`` input."""
    lines = text.splitlines()
    front = front_matter_split(lines)
    offset = front.line_count
    body = "\n".join(lines[offset:])
    tokens = _PARSER.parse(body)
    # Top-level blocks: (start, end) line spans relative to the body.
    blocks = [tuple(t.map) for t in tokens if t.level == 0 and t.map is not None and t.nesting >= 0]
    chunks: list[ChunkResult] = []
    sections = _sections(tokens, len(lines) - offset)
    heading_ends = {start: end for start, end in _heading_spans(tokens)}

    def bare(section: _Section) -> bool:
        after = heading_ends.get(section.start)
        return after is not None and not any(line.strip() for line in lines[offset + after : offset + section.end])

    for section in _merge_bare_headings(sections, bare=bare):
        spans = [(max(s, section.start), min(e, section.end)) for s, e in blocks if s < section.end and e > section.start]
        for start, end in _pack(lines, offset, spans, section, max_chars):
            chunk = _chunk(lines, offset + start, offset + end, section)
            if chunk is not None:
                chunks.append(chunk)
    return MarkdownDocument(chunks=chunks, front_matter=front)


def _sections(tokens: list, line_count: int) -> list[_Section]:
    headings = []
    for index, token in enumerate(tokens):
        if token.type == "heading_open" and token.level == 0 and token.map:
            title = tokens[index + 1].content.strip() if index + 1 < len(tokens) else ""
            headings.append((token.map[0], int(token.tag[1]), title))
    sections: list[_Section] = []
    first = headings[0][0] if headings else line_count
    if first > 0:
        sections.append(_Section(0, first, "", ""))
    stack: list[tuple[int, str]] = []
    for position, (start, level, title) in enumerate(headings):
        end = headings[position + 1][0] if position + 1 < len(headings) else line_count
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, f"{'#' * level} {title}"))
        sections.append(_Section(start, end, " > ".join(label for _, label in stack), title))
    return sections


def _heading_spans(tokens: list) -> list[tuple[int, int]]:
    return [tuple(t.map) for t in tokens if t.type == "heading_open" and t.level == 0 and t.map]


def _merge_bare_headings(sections: list[_Section], *, bare) -> list[_Section]:
    """A heading with no text of its own opens the next section's chunk.

    "# Guide" directly followed by "## Install" would otherwise be a chunk
    holding one heading line; merged, no line is lost and no hit is empty.
    """
    merged: list[_Section] = []
    carry: int | None = None
    for position, section in enumerate(sections):
        if carry is not None:
            section = _Section(carry, section.end, section.prefix, section.heading)
            carry = None
        if section.heading and bare(section) and position + 1 < len(sections):
            carry = section.start
            continue
        merged.append(section)
    return merged


def _pack(lines: list[str], offset: int, spans: list, section: _Section, max_chars: int) -> list[tuple[int, int]]:
    """Split a section into line ranges of at most ``max_chars`` at block boundaries."""
    if _size(lines, offset, section.start, section.end) <= max_chars or not spans:
        return [(section.start, section.end)]
    # Units run from one block start to the next; greedily pack whole units.
    cuts = sorted({section.start, *(s for s, _ in spans if s > section.start), section.end})
    pieces: list[tuple[int, int]] = []
    piece_start = section.start
    for unit_start, unit_end in zip(cuts, cuts[1:]):
        if unit_start > piece_start and _size(lines, offset, piece_start, unit_end) > max_chars:
            pieces.extend(_split_lines(lines, offset, piece_start, unit_start, max_chars))
            piece_start = unit_start
    pieces.extend(_split_lines(lines, offset, piece_start, section.end, max_chars))
    return pieces


def _split_lines(lines: list[str], offset: int, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """A block bigger than the budget splits between lines (a single long line stays whole)."""
    if _size(lines, offset, start, end) <= max_chars:
        return [(start, end)]
    pieces = []
    piece_start, size = start, 0
    for index in range(start, end):
        line_size = len(lines[offset + index]) + 1
        if size and size + line_size > max_chars:
            pieces.append((piece_start, index))
            piece_start, size = index, 0
        size += line_size
    pieces.append((piece_start, end))
    return pieces


def _size(lines: list[str], offset: int, start: int, end: int) -> int:
    return sum(len(line) + 1 for line in lines[offset + start : offset + end])


def _chunk(lines: list[str], start: int, end: int, section: _Section) -> ChunkResult | None:
    # Trim blank lines at both ends so the cited range is the text itself.
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    if start >= end:
        return None
    return ChunkResult(
        content="\n".join(lines[start:end]),
        context_prefix=section.prefix,
        language="markdown",
        symbol="",
        start_line=start + 1,
        end_line=end,
        metadata={"heading": section.heading} if section.heading else {},
    )
