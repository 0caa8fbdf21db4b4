"""Symbol lookup: the code chunks that define a name, for ``sym:NAME`` and one-identifier queries on the page.

A chunk of code carries the symbol it defines (``refund``, ``ChangeList.get_filters``). A name matches a symbol
that is it, or ends in ``.`` and it, letter case aside; exact case first. The full-text index narrows the rows
(the symbol's words are in every chunk's search vector), the symbol check runs on those only.
"""

import re

from django.contrib.postgres.search import SearchQuery

from access.scope import Scope
from retrieval.search import Hit
from sources.models import Chunk, Source

# What a symbol lookup accepts: identifiers, dotted (``Class.method``); anything else is a search.
SYMBOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def symbol_hits(*, name: str, scope: Scope, limit: int) -> list[Hit]:
    """Up to ``limit`` chunks in ``scope`` whose symbol is ``name``: exact case first, then shortest symbol and path.
    An empty list for a name that is not an identifier."""
    if not SYMBOL_NAME.fullmatch(name):
        return []
    last = name.rsplit(".", 1)[-1]
    rows = (
        Chunk.objects.filter(
            scope.chunk_filter(),
            source__kind=Source.Kind.FILE,
            search_vector=SearchQuery(last, config="english", search_type="plain"),
            symbol__iregex=rf"(^|\.){re.escape(name)}$",
        )
        .select_related("source")
        .order_by("path", "start_line")[: limit * 4]
    )
    ranked = sorted(rows, key=lambda c: (not _exact(c.symbol, name), len(c.symbol), len(c.path), c.path))[:limit]
    return [Hit(chunk=chunk, score=1.0) for chunk in ranked]


def _exact(symbol: str, name: str) -> bool:
    return symbol == name or symbol.endswith("." + name)
