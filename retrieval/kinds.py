"""The kinds of source a search can narrow to: one list, read by the API's schemas, the page's filter, MCP and the
query language's ``kind:``.

It is ``Source.Kind`` less the evaluation datasets (kept data never shows in real searches, access/scope.py), so a
new kind of source is searchable, and offered everywhere, the moment it is declared there.
"""

from typing import Annotated

from pydantic import AfterValidator, WithJsonSchema

from sources.models import Source

# What the page's filter says for each kind (a list of things, so plural); a kind left out says its model label.
_PLURAL = {
    Source.Kind.SKILL: "Skills",
    Source.Kind.FILE: "Files",
    Source.Kind.DOCUMENT: "Uploaded documents",
    Source.Kind.TOOL: "Tools",
    Source.Kind.MEMORY: "Memories",
}
SEARCH_KINDS: dict[str, str] = {
    kind.value: _PLURAL.get(kind, kind.label) for kind in Source.Kind if kind != Source.Kind.DATASET
}


def kind_problem(value: str) -> str | None:
    """Why ``value`` is not a searchable kind (with the valid ones), or None."""
    if value in SEARCH_KINDS:
        return None
    return f"unknown kind {value!r}; valid kinds: {', '.join(SEARCH_KINDS)}"


def _kind_checked(value: str) -> str:
    problem = kind_problem(value)
    if problem:
        raise ValueError(problem)
    return value


# A request's kind field: one of SEARCH_KINDS, published as an enum.
SearchKind = Annotated[
    str, AfterValidator(_kind_checked), WithJsonSchema({"type": "string", "enum": list(SEARCH_KINDS)})
]
