"""Markdown chunking by header hierarchy, on markdown-it-py's block tokens.

Each section (a heading and the lines up to the next heading) is one chunk
whose ``context_prefix`` is its heading path (``# Doc > ## Section``); text
before the first heading is a chunk of its own. Sections longer than
``max_chars`` split between top-level blocks (paragraphs, lists, fences); a
single oversized block goes to the window, which prefers paragraph breaks and
sentence ends. Headings inside fenced code are not headings: the parser, not
a regex, decides.
"""

import re
from dataclasses import dataclass

from markdown_it import MarkdownIt

from sources.chunking.frontmatter import FrontMatter, front_matter_split
from sources.chunking.types import ChunkResult
from sources.chunking.window import Lines, span_chunk, window_chunks

_PARSER = MarkdownIt("commonmark")
# markdown-it turns a lone "\r" into a line break; line numbers would then
# disagree with the "\n" lines we cite, so such text goes to the window.
_LONE_CR = re.compile(r"\r(?!\n)")


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


def markdown_chunk(text: str, *, max_chars: int = 1500, overlap: int = 200) -> MarkdownDocument:
    """Chunk a markdown document; never raises on any ``str`` input."""
    lines = Lines(text)
    front = front_matter_split(lines.items)
    offset = front.line_count
    if _LONE_CR.search(text):
        whole = window_chunks(lines, offset, len(lines), max_chars=max_chars, overlap=overlap, language="markdown")
        return MarkdownDocument(chunks=whole, front_matter=front)
    tokens = _PARSER.parse(lines.text(offset, len(lines)))
    # Top-level block starts, as absolute line indexes.
    block_starts = sorted({t.map[0] + offset for t in tokens if t.level == 0 and t.map is not None and t.nesting >= 0})
    heading_ends = {t.map[0] + offset: t.map[1] + offset for t in tokens if _is_heading(t) and t.map}

    def bare(section: _Section) -> bool:
        after = heading_ends.get(section.start)
        return after is not None and not any(not lines.blank(i) for i in range(after, section.end))

    chunks: list[ChunkResult] = []
    for section in _merge_bare_headings(_sections(tokens, offset, len(lines)), bare=bare):
        metadata = {"heading": section.heading} if section.heading else {}
        for start, end in _pack(lines, block_starts, section, max_chars):
            if lines.size(start, end) <= max_chars:
                chunk = span_chunk(
                    lines, start, end, language="markdown", context_prefix=section.prefix, metadata=metadata
                )
                chunks.extend([chunk] if chunk else [])
            else:
                chunks.extend(
                    window_chunks(
                        lines,
                        start,
                        end,
                        max_chars=max_chars,
                        overlap=overlap,
                        language="markdown",
                        context_prefix=section.prefix,
                        metadata=metadata,
                    )
                )
    return MarkdownDocument(chunks=chunks, front_matter=front)


def _is_heading(token) -> bool:
    return token.type == "heading_open" and token.level == 0 and bool(token.map)


def _sections(tokens: list, offset: int, line_count: int) -> list[_Section]:
    headings = []
    for index, token in enumerate(tokens):
        if _is_heading(token):
            title = tokens[index + 1].content.strip() if index + 1 < len(tokens) else ""
            headings.append((token.map[0] + offset, int(token.tag[1]), title))
    sections: list[_Section] = []
    first = headings[0][0] if headings else line_count
    if first > offset:
        sections.append(_Section(offset, first, "", ""))
    stack: list[tuple[int, str]] = []
    for position, (start, level, title) in enumerate(headings):
        end = headings[position + 1][0] if position + 1 < len(headings) else line_count
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, f"{'#' * level} {title}"))
        sections.append(_Section(start, end, " > ".join(label for _, label in stack), title))
    return sections


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


def _pack(lines: Lines, block_starts: list[int], section: _Section, max_chars: int) -> list[tuple[int, int]]:
    """Line ranges of at most ``max_chars``, cut only where a top-level block starts."""
    if lines.size(section.start, section.end) <= max_chars:
        return [(section.start, section.end)]
    cuts = [section.start, *(s for s in block_starts if section.start < s < section.end), section.end]
    pieces: list[tuple[int, int]] = []
    piece_start = section.start
    for unit_start, unit_end in zip(cuts, cuts[1:], strict=False):
        if unit_start > piece_start and lines.size(piece_start, unit_end) > max_chars:
            pieces.append((piece_start, unit_start))
            piece_start = unit_start
    pieces.append((piece_start, section.end))
    return pieces
