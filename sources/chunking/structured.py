"""JSON, YAML and TOML by top-level key; Jupyter notebooks by cell.

A data file that fits in one chunk stays whole. A larger one splits where
each top-level key starts (``symbol`` = the key). Content that does not parse
returns None, and the caller falls back to the window.
"""

import json
import re
import tomllib
from bisect import bisect_right

import yaml

from sources.chunking.spans import Span, spans_chunk, spans_fill
from sources.chunking.types import ChunkResult
from sources.chunking.window import Lines

# Strings (with escapes) and structural characters: enough to walk JSON
# without recursion, so nesting depth cannot exhaust the stack.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]]')
_COLON = re.compile(r"\s*:")
_YAML_KEY = re.compile(r"""^(?:"([^"]+)"|'([^']+)'|([^\s#\-?:][^:#]*?))\s*:(?:\s|$)""")
_TOML_TABLE = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_TOML_KEY = re.compile(r"""^\s*("[^"]+"|'[^']+'|[A-Za-z0-9_\-.]+)\s*=""")


def data_chunks(text: str, lines: Lines, *, kind: str, max_chars: int, overlap: int) -> list[ChunkResult] | None:
    try:
        if kind == "json":
            if not isinstance(json.loads(text), dict):
                return None
            starts = _json_key_lines(text)
        elif kind == "yaml":
            if not isinstance(yaml.safe_load(text), dict):
                return None
            starts = _yaml_key_lines(lines)
        else:
            tomllib.loads(text)
            starts = _toml_key_lines(lines)
    except (ValueError, yaml.YAMLError, RecursionError, MemoryError):
        return None
    if lines.size(0, len(lines)) <= max_chars or not starts:
        spans = [Span(0, len(lines))]
    else:
        spans = [
            Span(line, starts[i + 1][0] if i + 1 < len(starts) else len(lines), key)
            for i, (line, key) in enumerate(starts)
        ]
        spans = spans_fill(spans, 0, len(lines))
    return spans_chunk(lines, spans, max_chars=max_chars, overlap=overlap, language=kind)


def _json_key_lines(text: str) -> list[tuple[int, str]]:
    newlines = _newlines(text)
    found = []
    depth = 0
    for token in _JSON_TOKEN.finditer(text):
        value = token.group()
        if value in "{[":
            depth += 1
        elif value in "}]":
            depth -= 1
        elif depth == 1 and _COLON.match(text, token.end()):
            found.append((bisect_right(newlines, token.start()), json.loads(value)))
    return found


def _newlines(text: str) -> list[int]:
    return [match.start() for match in re.finditer("\n", text)]


def _yaml_key_lines(lines: Lines) -> list[tuple[int, str]]:
    found = []
    for index, line in enumerate(lines.items):
        match = _YAML_KEY.match(line)
        if match and not line.startswith(("---", "...")):
            found.append((index, next(g for g in match.groups() if g)))
    return found


def _toml_key_lines(lines: Lines) -> list[tuple[int, str]]:
    found = []
    in_table = False
    for index, line in enumerate(lines.items):
        table = _TOML_TABLE.match(line)
        if table:
            found.append((index, table.group(1)))
            in_table = True
        elif not in_table and (key := _TOML_KEY.match(line)):
            found.append((index, key.group(1).strip("\"'")))
    return found


def notebook_chunks(text: str, lines: Lines) -> list[ChunkResult] | None:
    """One chunk per cell; outputs dropped.

    The line range is where the cell's ``source`` sits in the notebook's
    JSON, so a citation opens the right place; ``content`` is the decoded
    cell source (the one strategy whose content is not the cited lines
    verbatim, which ``metadata["decoded"]`` says).
    """
    try:
        notebook = json.loads(text)
        cells = notebook["cells"]
        positions = _cell_source_positions(text)
    except (ValueError, KeyError, TypeError, RecursionError, MemoryError):
        return None
    if not isinstance(cells, list) or len(positions) != len(cells):
        return None
    newlines = _newlines(text)
    language = (notebook.get("metadata", {}).get("kernelspec", {}) or {}).get("language", "python")
    chunks = []
    for index, (cell, (start, end)) in enumerate(zip(cells, positions, strict=True)):
        source = cell.get("source", "")
        content = "".join(source) if isinstance(source, list) else str(source)
        if not content.strip():
            continue
        kind = cell.get("cell_type", "code")
        chunks.append(
            ChunkResult(
                content=content,
                context_prefix=f"cell {index + 1} ({kind})",
                language="markdown" if kind == "markdown" else language,
                symbol="",
                start_line=bisect_right(newlines, start) + 1,
                end_line=bisect_right(newlines, end) + 1,
                metadata={"cell": index, "cell_type": kind, "decoded": True},
            )
        )
    return chunks


def _cell_source_positions(text: str) -> list[tuple[int, int]]:
    """Character span of each cell's "source" value, walking the JSON tokens."""
    positions: list[tuple[int, int]] = []
    depth = 0
    in_cells = False
    cells_depth = 0
    source_from: int | None = None
    source_depth = 0
    for token in _JSON_TOKEN.finditer(text):
        value = token.group()
        if value in "{[":
            depth += 1
            continue
        if value in "}]":
            depth -= 1
            if source_from is not None and depth == source_depth:
                positions.append((source_from, token.end() - 1))
                source_from = None
            if in_cells and depth < cells_depth:
                in_cells = False
            continue
        is_key = _COLON.match(text, token.end())
        if is_key and depth == 1 and value == '"cells"':
            in_cells, cells_depth = True, 2
        elif is_key and in_cells and depth == cells_depth + 1 and value == '"source"':
            source_from, source_depth = token.end(), depth
        elif source_from is not None and depth == source_depth and not is_key:
            positions.append((source_from, token.end() - 1))  # a plain string source
            source_from = None
    return positions
