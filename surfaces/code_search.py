"""The search page's view of grep's lines (``re:PATTERN`` and a lone ``"exact text"``, as Sourcegraph and grep.app
spell them): grouped by file, what matched marked.

What the query means and what it finds is the engine's (retrieval/query_language.py, retrieval/querying.py, which
calls grep, retrieval/grep.py: the scope rule, the trigram index, RE2); this only renders its answer.
"""

import html
from dataclasses import dataclass, field
from itertools import groupby

from django.urls import reverse

from retrieval.grep import grep_matcher
from retrieval.query_language import ParsedQuery
from retrieval.schemas import GrepMatchOut, GrepOut

GREP_MAX_MATCHES = 200  # lines a page shows; the API's grep can page further
LINES_PER_FILE = 12  # a file's first matching lines; the viewer has the rest


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
    regex: bool = False  # re:, not "exact text"
    message: str = ""  # "searched N of M files ..." when a pattern the index cannot narrow met the scan limit


def grep_view(found: GrepOut, query: ParsedQuery, *, root_ids: dict[str, int]) -> GrepResults:
    """``found`` by file, each file's first lines with what matched marked; ``root_ids``: each visible root's id by
    name, for the viewer's links."""
    regex = bool(query.regex)
    matcher = grep_matcher(pattern=query.regex or query.exact[0], regex=regex, case_sensitive=False)
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
        regex=regex,
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
