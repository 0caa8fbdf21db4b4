"""Pseudo-relevance feedback for the vector channel (no Django): which queries get it and with what weights.

Rocchio: the query vector moved toward the mean of its first hits, then searched again. On msmarco-5k
(questions over prose passages) it lifts the vector channel; on click (docstring sentences over Python) it
hurts, since the neighbours of a function are other functions that share its vocabulary but not its purpose.
So it applies to questions and long texts only, and retrieval/vector.py applies it in SQL only when most of the
first hits are prose. In a hybrid search the lexical channel's first hits join the feedback too (the words the
question shares with a passage vote for it), and the moved vector then ranks alone (retrieval/fusion_weights.py).
Measured in docs/quality.md.
"""

from dataclasses import dataclass

from retrieval.query_shape import QueryShape, query_shape

# Chunk languages that are prose (the chunker's: sources/chunking/__init__.py); everything else is code or data.
PROSE_LANGUAGES = ("", "text", "markdown")


@dataclass(frozen=True, slots=True)
class Feedback:
    """``k`` first hits averaged; the feedback vector is query + ``beta`` x their mean (cosine ignores its length)
    + ``beta`` x ``lexical_weight`` x the mean of the lexical channel's first ``lexical`` hits when it ran;
    applied when at least ``prose_share`` of the vector hits are prose."""

    k: int = 20
    beta: float = 1.0
    prose_share: float = 0.5
    lexical: int = 5
    lexical_weight: float = 0.5

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"feedback k must be at least 1, got {self.k}")
        if self.beta <= 0:
            raise ValueError(f"feedback beta must be above 0, got {self.beta}")
        if not 0.0 <= self.prose_share <= 1.0:
            raise ValueError(f"feedback prose_share must be between 0 and 1, got {self.prose_share}")
        if self.lexical < 0 or self.lexical_weight < 0:
            raise ValueError(
                f"feedback lexical hits and weight must be at least 0, got {self.lexical} and {self.lexical_weight}"
            )


# msmarco-5k nDCG@10 through rag_eval (docs/quality.md): vector 0.805 -> 0.819 at k 10, beta 0.5 and at k 20,
# beta 1.0, fused 0.810 -> 0.814 and 0.819; offline, k 3-5 gave nothing. The lexical hits (offline, over the
# service's own lists, the moved vector ranking alone): fused 0.819 -> 0.830 at 5 hits, weight 0.5; 0.827-0.831 at
# 2-7 hits and weight 0.5-0.75; 0.824 at 10 hits; 0.826 at 5 with weight 0.25, 0.825 with 1.0.
FEEDBACK = Feedback()


def feedback_for(query: str, *, enabled: bool, feedback: Feedback = FEEDBACK) -> Feedback | None:
    """The feedback a query's vector search gets: None for names and stack traces (their neighbours are other
    code), or when it is switched off (RAG_VECTOR_FEEDBACK)."""
    if not enabled or query_shape(query) not in (QueryShape.QUESTION, QueryShape.LONG):
        return None
    return feedback
