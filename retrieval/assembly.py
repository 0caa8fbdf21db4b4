"""Context assembly: retrieved skills and file spans into one budgeted, cited text for a model.

Pure functions over plain data (retrieval/context.py loads the data). The
text has a skill index (each skill once, expanded on demand with get_skill)
and file evidence grouped by path, each block headed by its citation.
Overlapping or adjacent spans of one file merge into one range. Files are
ordered edges-first, best at the start and second best at the end, because
models read the middle of a long prompt worst (Liu et al. 2023, "Lost in the
Middle"). What does not fit the token budget is first compacted (head and
tail of its lines, the gap marked with the lines to read), then dropped, and
each drop says why.
"""

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime

from kernel.citations import citation_text

# A span is compacted only when at least this many of its lines still fit:
# fewer says nothing a citation would not.
COMPACT_MIN_LINES = 4
# Compaction keeps three head lines for each tail line: a span's head
# (signature, heading) says what it is, its tail how it ends.
COMPACT_HEAD_SHARE = 0.75
# Two ranges of one file this few lines apart read as one (chunkers leave the
# blank lines between sections out); the lines between are filled in.
MERGE_GAP_LINES = 5

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

SKILLS_HEADING = "## Skills\nRelevant skills, best sections inline; get_skill(slug) returns the whole text.\n"
FILES_HEADING = "## Files\n"


@dataclass(frozen=True, slots=True)
class SkillEntry:
    slug: str
    title: str
    section: str  # heading path of the skill's best chunk
    citation: str  # skill:<slug>:start-end
    why: str  # one line: which words matched and where the channels ranked it
    score: float
    indexed_at: datetime | None = None
    content_hash: str = ""
    stale: bool = False
    content: str = ""  # the best section's text, shown inline; empty: the index line alone
    language: str = "markdown"
    start_line: int | None = None  # the best chunk's lines, where the viewer opens the skill
    end_line: int | None = None


@dataclass(frozen=True, slots=True)
class Span:
    """Lines ``start_line..end_line`` of one document (a file of a root, or an evaluation document)."""

    document: str  # what merges: spans of the same document only
    path: str
    start_line: int
    end_line: int
    content: str  # exactly those lines
    score: float
    kind: str = "file"
    root_id: int | None = None  # a workspace root's file: where to read it now
    root: str = ""  # and that root's name, for read_range
    language: str = ""
    symbol: str = ""
    anchor: str = ""  # a document's page, slide or sheet ("p. 3"): the citation names it
    chunk_ids: tuple[int, ...] = ()
    indexed_at: datetime | None = None
    content_hash: str = ""
    stale: bool = False
    commit: str = ""  # a git root's file: the commit it was indexed at
    permalink_template: str = ""  # and its root's permalink template (sources/git_roots.py fills it in)
    omitted: tuple[int, int] | None = None  # compacted: the lines left out
    pieces: tuple["Span", ...] = ()  # merged: the spans it was merged from, each with its own score

    @property
    def citation(self) -> str:
        return citation_text(self.path, self.start_line, self.end_line, anchor=self.anchor)


@dataclass(frozen=True, slots=True)
class Part:
    """One block of the text, in text order, with the tokens its block takes there."""

    kind: str  # "skill" or the span's kind
    citation: str
    score: float
    tokens: int
    content: str
    item: SkillEntry | Span


@dataclass(frozen=True, slots=True)
class Dropped:
    kind: str
    citation: str
    score: float
    tokens: int  # what it would have taken
    reason: str


@dataclass(frozen=True, slots=True)
class Assembled:
    text: str
    parts: list[Part]
    dropped: list[Dropped] = field(default_factory=list)
    tokens_used: int = 0


def spans_merge(
    spans: list[Span], *, gap_lines: Callable[[Span, int, int], list[str] | None] | None = None
) -> list[Span]:
    """Overlapping or adjacent spans of one document as one range, best score first.

    Spans at most MERGE_GAP_LINES apart merge too when ``gap_lines(span,
    first, last)`` gives the lines between them (the file as it is, when it
    has not changed since indexing). Spans whose shared lines disagree (a long
    line split in pieces, an index caught mid-update) are kept apart rather
    than merged into a wrong text.
    """
    by_document: dict[str, list[Span]] = {}
    for span in spans:
        by_document.setdefault(span.document, []).append(span)
    merged: list[Span] = []
    for group in by_document.values():
        group.sort(key=lambda s: (s.start_line, s.end_line))
        current = group[0]
        for span in group[1:]:
            joined = _joined(current, span, gap_lines)
            if joined is None:
                merged.append(current)
                current = span
            else:
                current = joined
        merged.append(current)
    return sorted(merged, key=lambda s: (-s.score, s.document, s.start_line))


def _joined(a: Span, b: Span, gap_lines: Callable[[Span, int, int], list[str] | None] | None) -> Span | None:
    lines_a, lines_b = _lines(a), _lines(b)
    if lines_a is None or lines_b is None:
        return None
    gap = b.start_line - a.end_line - 1  # lines between them; negative: lines both hold
    if gap > 0:
        between = gap_lines(a, a.end_line + 1, b.start_line - 1) if gap_lines and gap <= MERGE_GAP_LINES else None
        if between is None or len(between) != gap:
            return None
        lines_a = lines_a + between
    elif gap < 0 and lines_a[len(lines_a) + gap :][: len(lines_b)] != lines_b[:-gap]:
        return None
    end = max(a.end_line, b.end_line)
    lines = lines_a + lines_b[max(-gap, 0) :] if b.end_line > a.end_line else lines_a
    symbols = [s for s in dict.fromkeys([a.symbol, b.symbol]) if s]
    anchors = [s for s in dict.fromkeys([a.anchor, b.anchor]) if s]
    return replace(
        a,
        end_line=end,
        content="\n".join(lines),
        score=max(a.score, b.score),
        symbol=", ".join(symbols),
        anchor=", ".join(anchors),
        chunk_ids=a.chunk_ids + b.chunk_ids,
        stale=a.stale or b.stale,
        pieces=(a.pieces or (a,)) + (b.pieces or (b,)),
    )


def _lines(span: Span) -> list[str] | None:
    lines = span.content.split("\n")
    return lines if len(lines) == span.end_line - span.start_line + 1 else None


def edges_first(items: list) -> list:
    """Best-first ``items`` reordered so the best sit at both ends: [1, 3, 5, 6, 4, 2]."""
    return items[0::2] + items[1::2][::-1]


def _one_line(text: str) -> str:
    """``text`` safe inside a heading or a citation line: a name with a newline cannot start a block of its own."""
    return _CONTROL.sub("\ufffd", text)


def skill_block(entry: SkillEntry) -> str:
    section = f', section "{_one_line(entry.section)}"' if entry.section else ""
    line = (
        f"- {_one_line(entry.title)} (`{entry.slug}`){section} [{_one_line(entry.citation)}]: {_one_line(entry.why)}\n"
    )
    return line + (_fenced(entry.content, entry.language) if entry.content else "")


def _fenced(content: str, language: str) -> str:
    fence = "`" * max(3, _longest_backtick_run(content) + 1)  # a fence the content cannot close
    return f"{fence}{_one_line(language)}\n{content}\n{fence}\n"


def file_header(span: Span) -> str:
    about = ", ".join(part for part in (span.language, f"root {span.root}" if span.root else "") if part)
    return f"### {_one_line(span.path)}" + (f" ({_one_line(about)})" if about else "") + "\n"


def span_block(span: Span) -> str:
    symbol = f" `{_one_line(span.symbol)}`" if span.symbol else ""
    stale = " (changed since indexed: read_range for the current lines)" if span.stale else ""
    return f"[{_one_line(span.citation)}]{symbol}{stale}\n" + _fenced(span.content, span.language)


def _longest_backtick_run(text: str) -> int:
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return longest


def span_compact(span: Span, *, fits: Callable[[Span], bool]) -> Span | None:
    """The most lines of ``span`` (head and tail, the gap marked) for which ``fits`` holds, or None."""
    lines = _lines(span)
    if lines is None or len(lines) <= COMPACT_MIN_LINES:
        return None
    best, low, high = None, COMPACT_MIN_LINES, len(lines) - 1  # keeping all lines is not compacting
    while low <= high:
        keep = (low + high) // 2
        candidate = _compacted(span, lines, keep)
        if fits(candidate):
            best, low = candidate, keep + 1
        else:
            high = keep - 1
    return best


def _compacted(span: Span, lines: list[str], keep: int) -> Span:
    head = math.ceil(keep * COMPACT_HEAD_SHARE)
    tail = keep - head
    first_gone, last_gone = span.start_line + head, span.end_line - tail
    where = (f"root={span.root} " if span.root else "") + f"path={span.path}"
    marker = _one_line(
        f"... [lines {first_gone}-{last_gone} omitted: read_range {where} start={first_gone} end={last_gone}] ..."
    )
    kept = lines[:head] + [marker] + (lines[len(lines) - tail :] if tail else [])
    return replace(span, content="\n".join(kept), omitted=(first_gone, last_gone))


def render(skills: list[SkillEntry], spans: list[Span]) -> tuple[str, list[tuple[SkillEntry | Span, str]]]:
    """The text, and each item with its block, in text order: skills by rank, then files edges-first."""
    blocks: list[tuple[SkillEntry | Span, str]] = []
    out: list[str] = []
    if skills:
        out.append(SKILLS_HEADING)
        for entry in skills:
            blocks.append((entry, skill_block(entry)))
            out.append(blocks[-1][1])
    if spans:
        out.append(("\n" if skills else "") + FILES_HEADING)
        files: dict[str, list[Span]] = {}
        for span in spans:  # best first: a file's place is its best span's
            files.setdefault(span.document, []).append(span)
        for group in edges_first(list(files.values())):
            out.append(file_header(group[0]))
            for span in sorted(group, key=lambda s: s.start_line):
                blocks.append((span, span_block(span)))
                out.append(blocks[-1][1])
    return "".join(out), blocks


def assemble(
    skills: list[SkillEntry],
    spans: list[Span],
    *,
    budget: int,
    count: Callable[[str], int],
    skill_share: float = 0.0,
) -> Assembled:
    """Skills (best first) and spans (best first, merged) in at most ``budget`` tokens as ``count`` counts them.

    Skills are curated: up to ``skill_share`` of the budget goes to their
    best sections, inline, best skill first; a skill whose section does not
    fit that share (or every skill, at share 0) is its index line alone, which
    names get_skill. Greedy in order of value. Blocks are counted one by one (the text is the
    sum of its blocks and headings, each ending in a newline, give or take a
    token where the tokenizer joins across a boundary); the whole text is
    counted at the end, and while it is over, the weakest span goes.
    """
    taken_skills: list[SkillEntry] = []
    taken_spans: list[Span] = []
    dropped: list[Dropped] = []
    files: set[str] = set()
    used = 0

    def over(needed: int) -> str:
        return f"over budget: it needs {needed} tokens, {max(budget - used, 0)} of {budget} were left"

    inline_room = int(budget * skill_share)
    for entry in skills:
        heading = 0 if taken_skills else count(SKILLS_HEADING)
        pointer = replace(entry, content="")
        if entry.content:
            inline = count(skill_block(entry))
            if inline - count(skill_block(pointer)) <= inline_room and used + heading + inline <= budget:
                taken_skills.append(entry)
                inline_room -= inline - count(skill_block(pointer))
                used += heading + inline
                continue
            entry = pointer
        needed = count(skill_block(entry)) + heading
        if used + needed <= budget:
            taken_skills.append(entry)
            used += needed
        else:
            dropped.append(Dropped("skill", entry.citation, entry.score, count(skill_block(entry)), over(needed)))
    pending = list(spans)
    while pending:
        span = pending.pop(0)
        overhead = (0 if taken_spans else count(("\n" if taken_skills else "") + FILES_HEADING)) + (
            0 if span.document in files else count(file_header(span))
        )
        block = count(span_block(span))
        if used + overhead + block > budget:
            if span.pieces:
                # A merged range that does not fit: its chunks, each whole or compacted on its own, so compaction
                # never cuts out the lines that made the range relevant; each waits its turn by its own score.
                pending = sorted([*span.pieces, *pending], key=lambda candidate: -candidate.score)
                continue

            def fits(candidate: Span, room: int = budget - used - overhead) -> bool:
                return count(span_block(candidate)) <= room

            compact = span_compact(span, fits=fits)
            if compact is None:
                dropped.append(Dropped(span.kind, span.citation, span.score, block, over(overhead + block)))
                continue
            span, block = compact, count(span_block(compact))
        taken_spans.append(span)
        files.add(span.document)
        used += overhead + block
    taken_spans = spans_merge(taken_spans)  # pieces taken whole that touch read as one range again
    text, blocks = render(taken_skills, taken_spans)
    total = count(text)
    while total > budget and (taken_spans or taken_skills):  # a join the block counts missed
        weakest = taken_spans.pop() if taken_spans else taken_skills.pop()
        size = count(skill_block(weakest) if isinstance(weakest, SkillEntry) else span_block(weakest))
        dropped.append(
            Dropped(
                "skill" if isinstance(weakest, SkillEntry) else weakest.kind,
                weakest.citation,
                weakest.score,
                size,
                f"over budget: the whole text counted {total} of {budget} tokens",
            )
        )
        text, blocks = render(taken_skills, taken_spans)
        total = count(text)
    parts = [
        Part(
            kind="skill" if isinstance(item, SkillEntry) else item.kind,
            citation=item.citation,
            score=item.score,
            tokens=count(block),
            content=block if isinstance(item, SkillEntry) else item.content,
            item=item,
        )
        for item, block in blocks
    ]
    return Assembled(text=text, parts=parts, dropped=dropped, tokens_used=total)
