"""Code in other languages by tree-sitter (prebuilt grammars), else by regex.

Top-level functions, classes, methods, interfaces, types and arrow functions
or function expressions bound to top-level names become chunks with their
symbol; class-like definitions too large for one chunk split into members
(``Class.method``). Without a grammar, a regex finds definition lines.
"""

import logging
import re
from typing import cast

from sources.chunking.spans import Span, comment_start, spans_chunk, spans_fill
from sources.chunking.types import ChunkResult
from sources.chunking.window import Lines

log = logging.getLogger(__name__)

# File extension -> tree-sitter-language-pack grammar name.
LANGUAGES = {
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".kt": "kotlin",
    ".kts": "kotlin",
    ".scala": "scala",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
    ".cs": "csharp",
    ".rb": "ruby",
    ".php": "php",
    ".swift": "swift",
    ".lua": "lua",
    ".sh": "bash",
    ".bash": "bash",
}

_DEFINITIONS = {
    "function_declaration",
    "generator_function_declaration",
    "class_declaration",
    "abstract_class_declaration",
    "interface_declaration",
    "type_alias_declaration",
    "enum_declaration",
    "module",
    "internal_module",
    "method_declaration",
    "type_declaration",
    "function_item",
    "struct_item",
    "enum_item",
    "trait_item",
    "impl_item",
    "mod_item",
    "macro_definition",
    "union_item",
    "record_declaration",
    "namespace_declaration",
    "annotation_type_declaration",
    "object_declaration",
    "function_definition",
    "struct_specifier",
    "class_specifier",
    "namespace_definition",
    "template_declaration",
    "enum_specifier",
    "type_definition",
    "method",
    "class",
    "singleton_method",
    "trait_declaration",
    "protocol_declaration",
    "class_definition",
    "object_definition",
    "trait_definition",
    "function_definition_statement",
    "local_function_definition_statement",
}
_MEMBERS = {
    "method_definition",
    "method_declaration",
    "constructor_declaration",
    "function_definition",
    "function_item",
    "method",
    "singleton_method",
    "function_declaration",
    "class_declaration",
    "interface_declaration",
    "template_declaration",
    "abstract_method_signature",
}
_WRAPPERS = {"export_statement", "lexical_declaration", "variable_declaration", "expression_statement"}
_FUNCTION_VALUES = {"arrow_function", "function_expression", "function", "generator_function", "class"}
_NAME_LEAVES = {
    "identifier",
    "field_identifier",
    "qualified_identifier",
    "operator_name",
    "destructor_name",
    "type_identifier",
}

_COMMENTS = {"ruby": ("#",), "bash": ("#",), "lua": ("--",), "php": ("//", "/*", "*", "#")}
_C_COMMENTS = ("//", "/*", "*", "*/", "///", "@", "#[")
_parsers: dict[str, object] = {}

_REGEX_DEFINITION = re.compile(
    r"^(?:export\s+)?(?:default\s+)?(?:pub(?:\([\w:]+\))?\s+)?(?:public\s+|private\s+|static\s+|abstract\s+|final\s+)*"
    r"(?:async\s+)?(?:function\*?|class|interface|fn|func|def|struct|enum|trait|impl|type|module|object)\s+"
    r"(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)"
)


def code_chunks(text: str, lines: Lines, *, language: str, max_chars: int, overlap: int) -> list[ChunkResult]:
    parser = _parser(language)
    markers = _COMMENTS.get(language, _C_COMMENTS)
    if parser is None:
        spans = _regex_spans(lines, markers)
    else:
        tree = parser.parse(text.encode("utf-8", "surrogatepass"))
        spans = _tree_spans(tree.root_node, lines, markers, max_chars)
    return spans_chunk(lines, spans_fill(spans, 0, len(lines)), max_chars=max_chars, overlap=overlap, language=language)


def _parser(language: str):
    if language not in _parsers:
        try:
            from tree_sitter_language_pack import SupportedLanguage, get_parser

            # Any name: an unknown one raises, and the regex takes over.
            _parsers[language] = get_parser(cast("SupportedLanguage", language))
        except Exception as exc:  # noqa: BLE001 - no grammar: the regex takes over
            log.info("no tree-sitter grammar for %s (%s); using the regex fallback", language, exc)
            _parsers[language] = None
    return _parsers[language]


def _tree_spans(root, lines: Lines, markers: tuple[str, ...], max_chars: int) -> list[Span]:
    nodes = root.named_children
    # PHP wraps everything in "program" after a php_tag; C# and others may
    # nest everything in one namespace: descend into a lone container.
    spans: list[Span] = []
    floor = 0
    for node in nodes:
        name = _definition_name(node)
        if name is None:
            continue
        start = comment_start(lines, node.start_point[0], floor, markers)
        end = node.end_point[0] + 1
        if lines.size(start, end) > max_chars and _class_like(node):
            spans.extend(_member_spans(node, name, lines, markers, start, end))
        else:
            spans.append(Span(start, end, name))
        floor = end
    return spans


def _member_spans(node, name: str, lines: Lines, markers, start: int, end: int) -> list[Span]:
    body = node.child_by_field_name("body") or next(
        (c for c in node.named_children if c.type.endswith(("body", "declaration_list", "block"))), None
    )
    if body is None and node.type in _WRAPPERS | {"template_declaration"}:
        inner = node.child_by_field_name("declaration") or (node.named_children[-1] if node.named_children else None)
        return _member_spans(inner, name, lines, markers, start, end) if inner is not None else [Span(start, end, name)]
    members = [] if body is None else [c for c in body.named_children if c.type in _MEMBERS]
    if not members:
        return [Span(start, end, name)]
    spans = []
    floor = start
    for member in members:
        member_start = comment_start(lines, member.start_point[0], floor, markers)
        member_end = member.end_point[0] + 1
        spans.append(Span(member_start, member_end, f"{name}.{_definition_name(member) or member.type}"))
        floor = member_end
    return spans_fill(spans, start, end, gap_symbol=name)


def _class_like(node) -> bool:
    return not any(word in node.type for word in ("function", "method", "arrow"))


def _definition_name(node) -> str | None:
    """The symbol a definition node declares; None for anything that is not one."""
    if node.type in _WRAPPERS:
        inner = node.child_by_field_name("declaration")
        if inner is not None:
            return _definition_name(inner)
        for declarator in node.named_children:
            value = declarator.child_by_field_name("value")
            if declarator.type == "variable_declarator" and value is not None and value.type in _FUNCTION_VALUES:
                return _text(declarator.child_by_field_name("name"))
        return None
    if node.type not in _DEFINITIONS and node.type not in _MEMBERS:
        return None
    if node.type == "impl_item":
        return _text(node.child_by_field_name("type"))
    if node.type == "type_declaration":
        spec = next((c for c in node.named_children if c.type in ("type_spec", "type_alias")), None)
        return _text(spec.child_by_field_name("name")) if spec is not None else ""
    if node.type == "method_declaration" and node.child_by_field_name("receiver") is not None:
        receiver = _first_of(node.child_by_field_name("receiver"), {"type_identifier"})
        method = _text(node.child_by_field_name("name"))
        return f"{_text(receiver)}.{method}" if receiver is not None else method
    if node.type == "template_declaration":
        inner = node.named_children[-1] if node.named_children else None
        return _definition_name(inner) or "" if inner is not None else ""
    named = node.child_by_field_name("name")
    if named is not None:
        return _text(named)
    declarator = node.child_by_field_name("declarator")
    while declarator is not None and declarator.type not in _NAME_LEAVES:
        declarator = declarator.child_by_field_name("declarator") or (
            declarator.named_children[0] if declarator.named_children else None
        )
    return _text(declarator) if declarator is not None else ""


def _first_of(node, types: set[str]):
    if node is None:
        return None
    if node.type in types:
        return node
    for child in node.named_children:
        found = _first_of(child, types)
        if found is not None:
            return found
    return None


def _text(node) -> str:
    return node.text.decode("utf-8", "replace") if node is not None else ""


def _regex_spans(lines: Lines, markers: tuple[str, ...]) -> list[Span]:
    starts = []
    for index, line in enumerate(lines.items):
        match = _REGEX_DEFINITION.match(line)
        if match:
            starts.append((index, match.group(1)))
    spans = []
    floor = 0
    for position, (index, name) in enumerate(starts):
        end = starts[position + 1][0] if position + 1 < len(starts) else len(lines)
        spans.append(Span(comment_start(lines, index, floor, markers), end, name))
        floor = end
    return spans
