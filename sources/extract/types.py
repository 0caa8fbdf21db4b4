"""What extraction yields: markdown-like text and the anchors (pages, slides, sheets) that cite it."""

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Anchor:
    """Lines ``start_line..end_line`` (1-based, inclusive) of the extracted text come from one page, slide or sheet."""

    label: str  # as a citation shows it: "p. 3", "slide 2", "sheet Sales"
    start_line: int
    end_line: int


@dataclass(frozen=True, slots=True)
class Extracted:
    text: str
    anchors: list[Anchor] = field(default_factory=list)  # empty: the text has no pages (DOCX, HTML, CSV)


@dataclass(frozen=True, slots=True)
class Limits:
    """What one extraction may take; hostile files meet these before they meet a parser's worst case."""

    max_pages: int = 2000  # pages, slides or sheets
    max_unpacked_bytes: int = 512 * 1024 * 1024  # a zip container's declared contents, summed
    timeout_seconds: float = 60.0
    max_memory_mb: int = 1024


class ExtractionRefused(Exception):
    """A file extraction will not index, with the reason the job shows ("encrypted PDF", "no text layer: needs OCR")."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TextBuilder:
    """Extracted text built block by block, recording which lines each anchor covers."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.anchors: list[Anchor] = []

    def block(self, text: str, *, tight: bool = False) -> None:
        """A paragraph, heading, list or table; blocks are separated by one blank line, unless ``tight``
        (the next item of a list)."""
        text = text.strip("\n")
        if not text.strip():
            return
        if self.lines and not tight:
            self.lines.append("")
        self.lines.extend(line.rstrip() for line in text.split("\n"))

    def anchored(self, label: str, blocks: list[str]) -> None:
        """Blocks of one page: an anchor over exactly their lines (none when the page holds no text)."""
        before = len(self.lines)
        for text in blocks:
            self.block(text)
        if len(self.lines) > before:
            start = before + 1 + (1 if before else 0)  # past the separating blank line
            self.anchors.append(Anchor(label, start, len(self.lines)))

    def result(self) -> Extracted:
        return Extracted("\n".join(self.lines) + ("\n" if self.lines else ""), list(self.anchors))


def markdown_table(rows: list[list[str]]) -> str:
    """Rows as a markdown table, the first row its header; cells on one line, pipes escaped."""
    width = max((len(row) for row in rows), default=0)
    if not width:
        return ""

    def cell(value: str) -> str:
        return " ".join(str(value).split()).replace("|", "\\|")

    lines = []
    for index, row in enumerate(rows):
        cells = [cell(value) for value in row] + [""] * (width - len(row))
        lines.append("| " + " | ".join(cells) + " |")
        if index == 0:
            lines.append("|" + "---|" * width)
    return "\n".join(lines)
