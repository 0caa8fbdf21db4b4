"""Whether a search found a good match, so the page can say "no good match" instead of showing a confident wrong hit.

Fused scores are ranks, not evidence: the top hit of a gibberish query is "first" all the same. The evidence is in
the channels. A hit the lexical channel found shares a word with the query; a hit only the vector channel found is
as good as its cosine. The line between the two (``RAG_SEARCH_GOOD_MATCH_SIMILARITY``) is calibrated by
``rag_eval``'s no-good-match section: real development queries against 50 generated gibberish ones.
"""

from collections.abc import Sequence

from retrieval.search import Hit

DEPTH = 3  # the hits a person reads first: one good one among them is a good match


def good_match(hits: Sequence[Hit], *, min_similarity: float) -> bool:
    """True when one of the first hits shares a word with the query or is at least ``min_similarity`` close in
    meaning; False for no hits at all."""
    for hit in list(hits)[:DEPTH]:
        vector = hit.channels.get("vector")
        if "lexical" in hit.channels or (vector is not None and vector.score >= min_similarity):
            return True
    return False


def best_similarity(hits: Sequence[Hit]) -> float:
    """The highest cosine among the first hits (-1 when the vector channel ranked none of them)."""
    scores = [hit.channels["vector"].score for hit in list(hits)[:DEPTH] if "vector" in hit.channels]
    return max(scores, default=-1.0)


def lexical_found(hits: Sequence[Hit]) -> bool:
    return any("lexical" in hit.channels for hit in list(hits)[:DEPTH])
