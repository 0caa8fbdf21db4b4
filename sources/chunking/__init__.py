"""Chunking: text in, ``ChunkResult`` out. Pure Python, no Django imports."""

from sources.chunking.frontmatter import FrontMatter, front_matter_split
from sources.chunking.markdown import MarkdownDocument, markdown_chunk
from sources.chunking.types import ChunkResult

# Stored with every chunk; changing chunk output means bumping this, which
# makes indexing re-chunk and re-embed everything on its next pass.
CHUNKING_VERSION = "md-1"

__all__ = [
    "CHUNKING_VERSION",
    "ChunkResult",
    "FrontMatter",
    "MarkdownDocument",
    "front_matter_split",
    "markdown_chunk",
]
