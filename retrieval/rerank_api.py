"""Reranking by a hosted service (Cohere, Jina, Voyage, Hugging Face TEI): the query and the fused head's texts
go out, a relevance score per text comes back.

A scorer like the cross-encoder's (``score(query, texts)``), so
``rerank.rerank`` runs it the same way. The call goes through the language
model client (kernel/llm.py): its error classes, its retry policy and the
circuit breaker every process shares, so a service that fails is skipped by
all of them for a while. Any failure raises RerankError: the search keeps its
fused order and says why.
"""

from collections.abc import Callable

from kernel.llm import LLMClient, LLMError
from retrieval.rerank import RerankError


class ApiScorer:
    """Scores (query, passage) pairs with a rerank endpoint's ``relevance_score`` (a passage it leaves out: 0)."""

    def __init__(self, client: Callable[[], LLMClient], *, model: str) -> None:
        self.client = client  # made when a search reranks
        self.model = model
        self.name = f"api:{model}"

    def score(self, query: str, texts: list[str]) -> list[float]:
        if not texts:
            return []
        try:
            results = self.client().rerank(query, texts, model=self.model, top_n=len(texts))
        except LLMError as exc:
            raise RerankError(f"the rerank service could not rerank: {_reason(exc)}") from exc
        scores = [0.0] * len(texts)
        for index, score in results:
            scores[index] = score
        return scores


def _reason(exc: LLMError) -> str:
    # The client words its errors for a language model; the model's own failure says it for a rerank service.
    failures = exc.details.get("models") or []
    if not failures:
        return exc.message
    return "; ".join(
        f"{failure['model']} cooling down in the circuit breaker"
        if failure["error"] == "cooldown"
        else f"{failure['model']} {failure['error']} ({failure.get('message', '')})"
        for failure in failures
    )
