"""The lexical channel's weight in fusion, chosen per query (no Django): from the query's shape and from how sure
the vector channel's own scores are.

One global weight (``RAG_FUSION_LEXICAL_WEIGHT``, 0.1) is right for a question, which MiniLM reads well; it is
wrong for a name (``get_object_or_404``, ``F``), where the vector of a lone token says little and the lexical
channel matches the symbol and path exactly, and for a question the vector channel is unsure about (a flat,
low list of cosines: nothing is close in meaning, so shared words should decide more).
"""

from collections.abc import Sequence

from retrieval.candidates import Candidate
from retrieval.query_shape import QueryShape

# The lexical weight for a name: chosen, not tuned; checked on the Django admin queries of docs/quality.md (the
# code sets' queries are all questions, so no set measures it).
NAME_WEIGHT = 1.0
# A question whose best cosine is below SURE_COSINE gets up to UNSURE_GAIN times the base weight more, in
# proportion to how far below it is (the lexical channel then counts for more where MiniLM found nothing close).
# msmarco-5k nDCG@10 0.8097 -> 0.8101 (its best cosines are mostly above 0.5); kept as it costs nothing.
SURE_COSINE = 0.6
UNSURE_GAIN = 4.0
# A question whose vector search the lexical channel's first hits steered (retrieval/vector_feedback.py) has had
# its lexical evidence already: the moved vector ranks alone. msmarco-5k nDCG@10 offline, over the service's own
# lists: 0.830 at 0, 0.828 / 0.826 / 0.826 at 0.02 / 0.05 / 0.1.
STEERED_WEIGHT = 0.0
# A question a person asks ("how does ...", "where is ...", retrieval/query_shape.py ``asks``) carries words the code
# itself uses (a setting's name, an error's text, the domain's nouns) more than a description of code does: its base
# weight is this many times the configured one. Issue 42's developer questions on celery (docs/quality.md), fused
# MRR@10 offline: 0.521 / 0.531 / 0.551 / 0.555 / 0.545 / 0.535 at 1 / 1.25 / 1.5 / 1.75 / 2 / 2.5; chosen on two
# thirds of the set, 1.5 gained on the third left out every time. Descriptions (the code sets' docstring sentences)
# are not asked: unchanged.
ASKED_GAIN = 1.5


def lexical_weight(
    *, base: float, shape: QueryShape, vector: Sequence[Candidate], steered: bool = False, asked: bool = False
) -> float:
    """The lexical channel's weight against the vector channel's 1 for this query (``steered``: the vector list
    was found with the lexical channel's first hits in its feedback; ``asked``: a question a person asks)."""
    if shape in (QueryShape.IDENTIFIER, QueryShape.SYMBOL):
        return max(base, NAME_WEIGHT)
    if steered:
        return STEERED_WEIGHT
    best = max((c.score for c in vector), default=0.0)
    unsure = max(0.0, SURE_COSINE - best) / SURE_COSINE
    return base * (ASKED_GAIN if asked else 1.0) * (1.0 + UNSURE_GAIN * unsure)
