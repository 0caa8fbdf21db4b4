"""How every surface cites a range of lines: one format, so a hit, a /context block, a read and a grep agree."""


def citation_text(path: str, start_line: int, end_line: int, *, anchor: str = "") -> str:
    """``path:start-end`` for files, ``skill:<slug>:start-end`` for skills; a document's range by its page, slide or
    sheet first, ``report.pdf p. 3 (lines 9-10)``: a person opens page 3, the lines are those of the extracted text
    (what read, grep and the viewer show)."""
    if anchor:
        return f"{path} {anchor} (lines {start_line}-{end_line})"
    return f"{path}:{start_line}-{end_line}"


def pages_label(labels: list[str]) -> str:
    """The anchors a range covers as one label: "p. 3", "p. 1-3" for consecutive pages, else "slide 1, slide 2"."""
    if len(labels) <= 1:
        return "".join(labels)
    if all(label.startswith("p. ") for label in labels):
        return f"p. {labels[0][3:]}-{labels[-1][3:]}"
    return ", ".join(labels)
