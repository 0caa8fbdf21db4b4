"""Chunks of an extracted document: each page, slide or sheet chunked on its own, cited by it.

A chunk never spans two pages, so its anchor is exact. Inside a page the
markdown chunker splits at headings and blocks; the chunk's heading path
starts with the file's name and the anchor ("report.pdf > p. 3 > ## Risks"),
its symbol is the anchor alone, and its lines are lines of the extracted
text, as the viewer shows it.
"""

import dataclasses
from pathlib import PurePosixPath

from sources.chunking import ChunkResult, markdown_chunk
from sources.extract.types import Anchor, Extracted


def document_chunks(extracted: Extracted, path: str, *, max_chars: int, overlap: int) -> list[ChunkResult]:
    lines = extracted.text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    anchors = extracted.anchors or [Anchor("", 1, len(lines))]
    name = PurePosixPath(path).name
    chunks: list[ChunkResult] = []
    for anchor in anchors:
        segment = "\n".join(lines[anchor.start_line - 1 : anchor.end_line]) + "\n"
        shift = anchor.start_line - 1
        for chunk in markdown_chunk(segment, max_chars=max_chars, overlap=overlap).chunks:
            prefix = " > ".join(part for part in (name, anchor.label, chunk.context_prefix) if part)
            metadata = dict(chunk.metadata)
            if anchor.label:
                metadata["anchor"] = anchor.label
            chunks.append(
                dataclasses.replace(
                    chunk,
                    context_prefix=prefix,
                    symbol=anchor.label or chunk.symbol,
                    start_line=chunk.start_line + shift,
                    end_line=chunk.end_line + shift,
                    metadata=metadata,
                )
            )
    return chunks
