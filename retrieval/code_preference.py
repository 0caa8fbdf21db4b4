"""Code search's preferences over the fused order (no Django): the definition a query names before the code that
merely uses it, and Python before the stylesheet that shares its words.

Issue 29's report, on Django's source: "how does the admin build changelist filters" put ``changelists.css``
(``#changelist-filter`` in every other rule) above the Python, and ``ChangeList.get_filters`` was not in the top
15; ``F`` found unrelated code. A chunk defines a name when its symbol ends in it (``ChangeList.get_filters``
defines ``get_filters``); what a question and a definition share is the words of the defined name.
"""

from collections.abc import Sequence
from dataclasses import replace
from pathlib import PurePosixPath

from retrieval.candidates import Scored
from retrieval.query_shape import QueryShape, name_words

# The bonus a chunk gets for defining what the query names, in cosine units (a fused score is a cosine plus the
# weighted lexical share), and the factor a style or data file's score is multiplied by when the question is about
# code. click MRR@10 (docs/quality.md, in exploration): 0.577 without the bonus, 0.597 / 0.604 / 0.589 / 0.555 at
# 0.05 / 0.1 / 0.2 / 0.3. The asset factor is checked on the Django admin queries only.
DEFINITION_BONUS = 0.1
ASSET_FACTOR = 0.8
# A question a developer asks ("how does the worker decide ... when a task ...") names the things around the code it
# wants (task, worker, queue, chord: the codebase's own class names), so a one-word name it mentions (``Task``,
# ``chain``, ``QueueNotFound``) is its subject, not its answer: for such a question (``asks``) a one-word name earns
# this share of the bonus; a name of several words (``get_filters``) earns it in full. Issue 42's developer questions
# on celery (docs/quality.md), fused MRR@10 offline: 0.490 with the full bonus; 0.506 / 0.520 / 0.521 at a half /
# a quarter / none.
ASKED_ONE_WORD_SHARE = 0.0
# A query that is a name is a symbol lookup: its definitions go first, before any score difference (a fused score
# is at most 1 + the lexical weight).
LOOKUP_BONUS = 2.0
# Files that hold no program logic: styles, markup, data, prose-as-text, translations, source maps.
ASSET_SUFFIXES = frozenset(".css .scss .sass .less .html .htm .svg .xml .json .txt .po .map .csv .tsv .lock".split())
# A query that names one of these asks for the assets themselves: nothing is demoted.
ASSET_WORDS = frozenset(
    "css scss sass less style styles stylesheet stylesheets html htm template templates markup svg icon icons xml "
    "json txt translation translations po locale csv".split()
)


def is_asset(path: str) -> bool:
    name = PurePosixPath(path).name.lower()
    return name.endswith(".min.js") or PurePosixPath(name).suffix in ASSET_SUFFIXES


def code_preferred(
    order: Sequence[Scored], *, query: str, shape: QueryShape, definition: float, asset: float, asked: bool = False
) -> list[Scored]:
    """``order`` rescored: + ``definition`` x the share of a chunk's defined name that the query names (for an
    identifier or symbol query, LOOKUP_BONUS for defining that very name; for a question a person asks (``asked``,
    retrieval/query_shape.py ``asks``), ASKED_ONE_WORD_SHARE of it for a one-word name), and x ``asset`` for a
    style, markup or data file when the pool holds code and the query does not ask for such files. Re-sorted,
    stable."""
    if not order:
        return list(order)
    words = name_words(query)
    one_word = ASKED_ONE_WORD_SHARE if asked else 1.0
    named = query.strip().removesuffix("()").rsplit(".", 1)[-1].lower()
    lookup = shape in (QueryShape.IDENTIFIER, QueryShape.SYMBOL)
    demote = asset < 1.0 and not (words & ASSET_WORDS) and any(item.symbol for item in order)
    rescored = []
    for item in order:
        score = item.score
        if item.symbol:
            defined = item.symbol.rsplit(".", 1)[-1]
            if lookup:
                score += LOOKUP_BONUS if defined.lower() == named else 0.0
            else:
                parts = name_words(defined) - {defined.lower()} or {defined.lower()}
                score += definition * len(parts & words) / len(parts) * (one_word if len(parts) == 1 else 1.0)
        if demote and is_asset(item.path):
            score *= asset
        rescored.append(replace(item, score=score) if score != item.score else item)
    return sorted(rescored, key=lambda item: -item.score)
