"""Reranking with a language model, when no cross-encoder fits: it reads the fused head and names the
passages that answer the query, best first.

A scorer like the cross-encoder's (``score(query, texts)``), so
``rerank.rerank`` runs it the same way: a kept passage scores by its place
(the first 1.0, the last 1/n), a passage left out scores 0 and is dropped by
the score threshold. Any failure (the model unreachable, an answer without a
readable list) raises RerankError: the search keeps its fused order and
says why. Input is bounded: each passage is cut to ``passage_chars``.
"""

import json
import re
from collections.abc import Callable, Sequence

from kernel.llm import LLMClient, LLMError
from retrieval.rerank import RerankError

PROMPT_VERSION = 1
_INSTRUCTIONS = (
    "You rank search results. Given a query and numbered passages, answer with JSON only: "
    '{"ranking": [numbers of the passages that help answer the query, most helpful first]}. '
    "Leave out passages that do not help. Use the numbers as given."
)
_JSON = re.compile(r"\{.*?\}|\[.*?\]", re.DOTALL)


class LLMScorer:
    """Scores (query, passage) pairs by the place a language model gives each passage (0: left out)."""

    def __init__(
        self, client: Callable[[], LLMClient], *, models: Sequence[str], passage_chars: int, max_tokens: int = 200
    ) -> None:
        self.client = client  # made when a search reranks: a provider not configured is then a reason, not a crash
        self.models = tuple(models)
        self.passage_chars = passage_chars
        self.max_tokens = max_tokens
        self.name = f"llm:{self.models[0] if self.models else ''}"

    def score(self, query: str, texts: list[str]) -> list[float]:
        if not texts:
            return []
        passages = "\n\n".join(
            f"[{number}] {_cut(text, self.passage_chars)}" for number, text in enumerate(texts, start=1)
        )
        messages = [
            {"role": "system", "content": _INSTRUCTIONS},
            {"role": "user", "content": f"Query: {query}\n\nPassages:\n\n{passages}"},
        ]
        try:
            answer = self.client().chat(messages, max_tokens=self.max_tokens, models=self.models or None)
        except LLMError as exc:
            raise RerankError(f"the language model could not rerank: {exc.message}") from exc
        order = ranking_parse(answer, count=len(texts))
        if order is None:
            raise RerankError(f"the language model's answer had no ranking: {answer[:200]!r}")
        scores = [0.0] * len(texts)
        for place, number in enumerate(order):
            scores[number - 1] = 1.0 - place / len(order)
        return scores


def ranking_parse(answer: str, *, count: int) -> list[int] | None:
    """The passage numbers (1..count, first mention only) of the first JSON list or {"ranking": [...]} in ``answer``.

    Prose or a code fence around the JSON is ignored; numbers given as
    strings ("3") or out of range are dropped; None when no list is found.
    """
    for match in _JSON.finditer(answer):
        try:
            value = json.loads(match.group())
        except ValueError:
            continue
        if isinstance(value, dict):
            value = next((v for v in value.values() if isinstance(v, list)), None)
        if not isinstance(value, list):
            continue
        order: list[int] = []
        for item in value:
            number = int(item) if isinstance(item, int | str) and str(item).strip().isdigit() else None
            if number is not None and 1 <= number <= count and number not in order:
                order.append(number)
        return order
    return None


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " …"
