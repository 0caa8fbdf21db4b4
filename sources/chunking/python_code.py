"""Python by its syntax tree: one chunk per top-level function or class.

Decorators and the comment block right above a definition belong to it. A
class too large for one chunk becomes a header chunk (signature, docstring,
class attributes) plus one chunk per method (``symbol`` = ``Class.method``).
Module-level code between definitions is chunked too. Returns None when the
source does not parse, so the caller falls back to the window.
"""

import ast

from sources.chunking.spans import Span, comment_start, spans_chunk, spans_fill
from sources.chunking.types import ChunkResult
from sources.chunking.window import Lines

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def python_chunks(text: str, lines: Lines, *, max_chars: int, overlap: int) -> list[ChunkResult] | None:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    spans: list[Span] = []
    floor = 0
    for node in tree.body:
        if not isinstance(node, _DEFINITIONS):
            continue
        start, end = _node_lines(node, lines, floor)
        if isinstance(node, ast.ClassDef) and lines.size(start, end) > max_chars:
            spans.extend(_class_spans(node, lines, start, end))
        else:
            spans.append(Span(start, end, node.name))
        floor = end
    return spans_chunk(lines, spans_fill(spans, 0, len(lines)), max_chars=max_chars, overlap=overlap, language="python")


def _node_lines(node: ast.stmt, lines: Lines, floor: int) -> tuple[int, int]:
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]) - 1
    return comment_start(lines, first, floor, ("#",)), node.end_lineno or node.lineno


def _class_spans(node: ast.ClassDef, lines: Lines, start: int, end: int) -> list[Span]:
    methods = [child for child in node.body if isinstance(child, _DEFINITIONS)]
    if not methods:
        return [Span(start, end, node.name)]
    spans = []
    floor = start
    for method in methods:
        method_start, method_end = _node_lines(method, lines, floor)
        spans.append(Span(method_start, method_end, f"{node.name}.{method.name}"))
        floor = method_end
    # Header, attributes between methods and the tail keep the class's name.
    return spans_fill(spans, start, end, gap_symbol=node.name)
