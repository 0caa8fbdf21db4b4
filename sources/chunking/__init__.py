"""Chunking: text in, ``ChunkResult`` out. Pure Python, no Django imports.

``chunk_text`` picks a strategy by file name and never raises: any strategy
that cannot handle its input falls back to the boundary-aware window.
"""

import logging
import re
from pathlib import PurePosixPath

from sources.chunking.frontmatter import FrontMatter, front_matter_split
from sources.chunking.markdown import MarkdownDocument, markdown_chunk
from sources.chunking.python_code import python_chunks
from sources.chunking.strategies import STRATEGIES, chunker_reads, strategy_for, strategy_identity
from sources.chunking.structured import data_chunks, notebook_chunks
from sources.chunking.treesitter import LANGUAGES, code_chunks
from sources.chunking.types import ChunkResult
from sources.chunking.window import Lines, window_chunks

log = logging.getLogger(__name__)

MARKDOWN = {".md", ".markdown", ".mdx", ".mdown"}
DATA = {".json": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml"}
_LONE_CR = re.compile(r"\r(?!\n)")

__all__ = [
    "STRATEGIES",
    "ChunkResult",
    "FrontMatter",
    "MarkdownDocument",
    "chunk_text",
    "chunker_identity",
    "chunker_reads",
    "front_matter_split",
    "language_for",
    "markdown_chunk",
    "strategy_identity",
]


def language_for(path: str) -> str:
    suffix = PurePosixPath(path).suffix.lower()
    if suffix in MARKDOWN:
        return "markdown"
    if suffix in (".py", ".pyi"):
        return "python"
    if suffix == ".ipynb":
        return "notebook"
    return DATA.get(suffix) or LANGUAGES.get(suffix) or "text"


def chunker_identity(path: str, *, document: bool = False) -> str:
    """The identity of the chunker ``path`` goes through (``markdown:1+window:1``; strategies.py), part of its
    fingerprint, so a new version of one strategy re-embeds only the files it chunks.

    ``document``: the file's text is extracted first (sources.extract.extractor_for names an extractor), so it is
    chunked as a document whatever its suffix. A root's HTML fragment, read as text, goes through the window, which
    the document's identity includes: a file's fingerprint is decided before its bytes say which it is.
    """
    return strategy_identity(strategy_for(language_for(path), document=document))


def chunk_text(text: str, path: str, *, max_chars: int = 1500, overlap: int = 200) -> list[ChunkResult]:
    """Chunks of ``text`` at its natural boundaries, chosen by ``path``'s name."""
    max_chars = max(int(max_chars), 50)
    overlap = min(max(int(overlap), 0), max_chars // 2)
    lines = Lines(text)
    language = language_for(path)
    try:
        chunks = _by_structure(text, lines, language, max_chars, overlap)
    except Exception:  # noqa: BLE001 - a strategy bug must not lose the file
        log.exception("chunking %s as %s failed; falling back to the window", path, language)
        chunks = None
    if chunks is None:
        chunks = window_chunks(
            lines,
            0,
            len(lines),
            max_chars=max_chars,
            overlap=overlap,
            language="text" if language == "notebook" else language,
        )
    return chunks


def _by_structure(text: str, lines: Lines, language: str, max_chars: int, overlap: int) -> list[ChunkResult] | None:
    if language == "markdown":
        document = markdown_chunk(text, max_chars=max_chars, overlap=overlap)
        if document.front_matter.data:
            for chunk in document.chunks:
                chunk.metadata["front_matter"] = document.front_matter.data
        return document.chunks
    if language == "notebook":
        return notebook_chunks(text, lines)
    # The parsers count lines on "\r" too; our citations count "\n" only.
    if _LONE_CR.search(text):
        return None
    if language == "python":
        return python_chunks(text, lines, max_chars=max_chars, overlap=overlap)
    if language in ("json", "yaml", "toml"):
        return data_chunks(text, lines, kind=language, max_chars=max_chars, overlap=overlap)
    if language != "text":
        return code_chunks(text, lines, language=language, max_chars=max_chars, overlap=overlap)
    return None
