"""Which chunking strategy makes a document's chunks, and its identity in the fingerprint (sources.ingest).

Each strategy has its own version: changing one strategy's output bumps it,
and only the documents it chunks are re-chunked and re-embedded. A strategy
that runs another's code ``uses`` it, and that one's identity joins its own:
the markdown chunker splits oversized sections with the window, so a new
window re-embeds markdown too (``markdown:1+window:1``), while a new markdown
chunker leaves code and plain text alone.

Bump the version of the strategy whose module changed (the comments below
name each one's modules); a change to chunk_text's dispatch that moves a
suffix to another strategy needs no bump: the suffix's identity changes.
"""

from dataclasses import dataclass

from sources.chunking.treesitter import LANGUAGES

MAX_CHARS, OVERLAP = "max_chars", "overlap"  # RAG_CHUNK_MAX_CHARS, RAG_CHUNK_OVERLAP (sources.config.IngestSettings)


@dataclass(frozen=True, slots=True)
class Strategy:
    version: int
    uses: tuple[str, ...] = ()  # the strategies whose code it runs: their identities join its own
    reads: tuple[str, ...] = (MAX_CHARS, OVERLAP)  # the chunk settings it is run with (only these join fingerprints)


STRATEGIES: dict[str, Strategy] = {
    # window.py and spans.py: plain text, the fallback of every strategy below, and the windows inside them.
    "window": Strategy(1),
    # markdown.py and frontmatter.py, and chunk_text's front matter on each chunk.
    "markdown": Strategy(1, uses=("window",)),
    # python_code.py (the ast, not tree-sitter).
    "code-python": Strategy(1, uses=("window",)),
    # treesitter.py's span finding, shared by every grammar; a change for one grammar bumps only code-<grammar>.
    "code": Strategy(1, uses=("window",)),
    **{f"code-{grammar}": Strategy(1, uses=("code",)) for grammar in sorted(set(LANGUAGES.values()))},
    # structured.py's data_chunks: JSON, YAML and TOML by their top-level keys.
    "structured": Strategy(1, uses=("window",)),
    # structured.py's notebook_chunks: a cell a chunk; an unreadable notebook falls back to the window.
    "notebook": Strategy(1, uses=("window",)),
    # sources/extract/chunks.py: extracted text (PDF, Office, CSV, HTML pages) by page, slide or sheet, then markdown.
    "document": Strategy(1, uses=("markdown",)),
    # sources/services.py: a skill's body as markdown at the chunker's own overlap (RAG_CHUNK_OVERLAP is not used).
    "skill": Strategy(1, uses=("markdown",), reads=(MAX_CHARS,)),
    # sources/ingest.item_index_whole: a tool or a memory is one chunk as written; no chunk setting applies.
    "whole": Strategy(1, reads=()),
}

# chunk_text's language (sources.chunking.language_for) -> the strategy that chunks it; grammars are code-<grammar>.
_BY_LANGUAGE = {
    "markdown": "markdown",
    "python": "code-python",
    "notebook": "notebook",
    "json": "structured",
    "yaml": "structured",
    "toml": "structured",
    "text": "window",
}


def strategy_identity(name: str) -> str:
    """``name:version``, then the identities of the strategies it uses, each once: ``skill:1+markdown:1+window:1``."""
    parts: list[str] = []

    def visit(current: str) -> None:
        strategy = STRATEGIES[current]
        part = f"{current}:{strategy.version}"
        if part not in parts:
            parts.append(part)
            for used in strategy.uses:
                visit(used)

    visit(name)
    return "+".join(parts)


def strategy_for(language: str, *, document: bool = False) -> str:
    """The name of the strategy that chunks a text of ``language`` (sources.chunking.language_for); ``document``:
    text extracted from a document (sources/extract), chunked as one whatever its suffix."""
    if document:
        return "document"
    return _BY_LANGUAGE.get(language) or f"code-{language}"


def chunker_reads(identity: str) -> tuple[str, ...]:
    """The chunk settings the strategy named first in ``identity`` is run with (``MAX_CHARS``, ``OVERLAP``)."""
    return STRATEGIES[identity.split(":", 1)[0]].reads
