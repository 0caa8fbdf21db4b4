"""The search page's code-search forms: ``re:PATTERN`` and ``"exact text"`` (grep over the files one may see) and
``sym:NAME`` (the chunks that define a name), as Sourcegraph and grep.app spell them.

Grep is the API's own (retrieval/grep.py: the scope rule, the trigram index, RE2); the page groups its lines by file
and marks what matched. Anything else in the box is an ordinary search.
"""

import html
from dataclasses import dataclass, field
from itertools import groupby

from django.urls import reverse

from access.identity import Identity
from kernel.errors import ApplicationError
from retrieval.config import FilesLimits
from retrieval.grep import grep_answer, grep_matcher
from retrieval.schemas import GrepIn, GrepMatchOut

GREP_MAX_MATCHES = 200  # lines a page shows; the API's grep can page further
LINES_PER_FILE = 12  # a file's first matching lines; the viewer has the rest


@dataclass(frozen=True, slots=True)
class QueryForm:
    """What the box asks for: ``kind`` is "search", "regex", "exact" or "symbol"; ``text`` the rest."""

    kind: str
    text: str


def query_form(query: str) -> QueryForm:
    """``re:…`` a regex, ``sym:…`` a symbol, a query in double quotes exact text; anything else a search."""
    for prefix, kind in (("re:", "regex"), ("sym:", "symbol")):
        if query.startswith(prefix) and query[len(prefix) :].strip():
            return QueryForm(kind, query[len(prefix) :].strip())
    if len(query) > 2 and query.startswith('"') and query.endswith('"') and '"' not in query[1:-1]:
        return QueryForm("exact", query[1:-1])
    return QueryForm("search", query)


@dataclass(frozen=True, slots=True)
class GrepFile:
    root: str
    path: str
    url: str
    numbers: str  # the gutter: one line number per shown line
    html: str  # the shown lines, escaped, matches marked
    more: int  # matching lines of this file not shown


@dataclass(frozen=True, slots=True)
class GrepResults:
    files: list[GrepFile] = field(default_factory=list)
    lines: int = 0
    truncated: bool = False
    stopped: str = ""
    message: str = ""  # "searched N of M files ..." when a pattern the index cannot narrow met the scan limit
    error: str = ""


def grep_results(
    identity: Identity, form: QueryForm, *, root_id: str, root_ids: dict[str, int], language: str = ""
) -> GrepResults:
    """``form`` (regex or exact) over the files ``identity`` may see (only root ``root_id``, only ``language``, when
    given); ``root_ids``: each visible root's id by name, for the viewer's links."""
    regex = form.kind == "regex"
    try:
        found = grep_answer(
            identity,
            GrepIn.model_validate(
                {
                    "pattern": form.text,
                    "regex": regex,
                    "root": root_id or None,
                    "lang": language or None,
                    "max_matches": GREP_MAX_MATCHES,
                }
            ),
            limits=FilesLimits.from_settings(),
        )
        matcher = grep_matcher(pattern=form.text, regex=regex, case_sensitive=False)
    except ApplicationError as exc:
        return GrepResults(error=exc.message)
    except ValueError as exc:  # the schema's own checks (length, control characters)
        return GrepResults(error=str(exc).splitlines()[-1])
    files = []
    for (root, path), group in groupby(found.matches, key=lambda m: (m.root, m.path)):
        matches = list(group)
        shown = matches[:LINES_PER_FILE]
        first = shown[0].line
        url = reverse("view-file", args=[root_ids[root], path]) + f"#L{first}" if root in root_ids else ""
        files.append(
            GrepFile(
                root=root,
                path=path,
                url=url,
                numbers="\n".join(str(m.line) for m in shown),
                html="\n".join(_marked(m, matcher.line) for m in shown),
                more=len(matches) - len(shown),
            )
        )
    return GrepResults(
        files=files,
        lines=len(found.matches),
        truncated=found.truncated,
        stopped=found.stopped or "",
        message=found.message,
    )


def _marked(match: GrepMatchOut, search) -> str:
    """The line escaped, each non-overlapping match in <mark>."""
    text, out, cursor, position = match.text, [], 0, 0
    while position <= len(text):
        found = search(text, position)
        if found is None:
            break
        start, end = found.span()
        if end == start:  # an empty match (``re:^``): nothing to mark, look past it
            position = start + 1
            continue
        out.append(html.escape(text[cursor:start]) + "<mark>" + html.escape(text[start:end]) + "</mark>")
        cursor = position = end
    out.append(html.escape(text[cursor:]))
    return "".join(out)
