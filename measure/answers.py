"""`rag_eval`'s answer section: cited answers to the judged queries, scored by the qrels and by a model as judge.

Citation precision: of the passages an answer cites, the share the qrels
judge relevant (grade > 0), over all answers (each citation counts once).
Faithfulness: the chat model, shown the sources and the answer, says which
share of the answer's claims the cited sources support (0..1), averaged over
the answers it scored. The same model writes and judges; a judge that
agrees with itself too readily is a known bias, so the number compares
configurations of this service, not models.
"""

import json
import re
from collections.abc import Callable

from access.scope import Scope
from kernel.llm import LLMClient, LLMError
from retrieval.answering import AnswerSource, answer_collect, answer_events, answer_sources
from retrieval.config import CitedAnswerConfig
from retrieval.context import context_build
from sources.models import Source

ANSWER_BUDGET = 2000  # tokens of sources per answer: /api/v1/answer's default budget is 3000, a bot's often less
ANSWER_CANDIDATES = 50
JUDGE_PROMPT_VERSION = 1
_JUDGE = (
    "You check answers against their sources. Given numbered sources and an answer that cites them as [n], decide "
    "which share of the answer's claims the cited sources support. Answer with JSON only: "
    '{"faithfulness": a number from 0 (nothing supported) to 1 (every claim supported)}.'
)
_NUMBER = re.compile(r"(?<![\d.])(?:0(?:\.\d+)?|1(?:\.0+)?|\.\d+)(?![\d.])")


def answers_evaluate(
    *,
    queries: list[tuple[str, str]],
    qrels: dict[str, dict[str, int]],
    source: Source,
    config: CitedAnswerConfig,
    client: Callable[[], LLMClient],
) -> dict[str, float | int]:
    """Answers to ``queries`` ((query id, text)) from the dataset ``source``, scored against ``qrels``."""
    scope = Scope(kinds=(Source.Kind.DATASET,), source_ids=(source.pk,))
    cited = relevant = answered = failed = dropped = uncited = 0
    judged: list[float] = []
    for query_id, text in queries:
        context = context_build(
            query=text,
            budget=ANSWER_BUDGET,
            scope=scope,
            k={Source.Kind.DATASET: ANSWER_CANDIDATES},
            config=config.context,
        )
        sources = answer_sources(context)
        out = answer_collect(answer_events(query=text, sources=sources, client=client, max_tokens=config.max_tokens))
        if out["error"] is not None or not out["answer"]:
            failed += 1
            continue
        answered += 1
        dropped += out["dropped_markers"]
        uncited += len(out["uncited_numeric_sentences"])
        by_number = {s.number: s for s in sources}
        grades = qrels.get(query_id, {})
        for citation in out["citations"]:
            cited += 1
            relevant += grades.get(by_number[citation["number"]].path, 0) > 0
        score = faithfulness_judge(text, sources, out["answer"], client=client, max_tokens=config.max_tokens)
        if score is not None:
            judged.append(score)
    return {
        "answered": answered,
        "failed": failed,
        "citations": cited,
        "citation_precision": relevant / cited if cited else 0.0,
        "faithfulness": sum(judged) / len(judged) if judged else 0.0,
        "faithfulness_judged": len(judged),
        "dropped_markers": dropped,
        "uncited_numeric_sentences": uncited,
    }


def faithfulness_judge(
    query: str, sources: list[AnswerSource], answer: str, *, client: Callable[[], LLMClient], max_tokens: int
) -> float | None:
    """The judge's share of supported claims, or None when it could not answer or said no number in 0..1."""
    blocks = "\n\n".join(f"[{s.number}] {s.citation}\n{s.content.strip()}" for s in sources)
    messages = [
        {"role": "system", "content": _JUDGE},
        {"role": "user", "content": f"Sources:\n\n{blocks}\n\nQuestion: {query}\n\nAnswer to check:\n{answer}"},
    ]
    try:
        reply = client().chat(messages, max_tokens=min(max_tokens, 100))
    except LLMError:
        return None
    return judge_parse(reply)


def judge_parse(reply: str) -> float | None:
    """``{"faithfulness": 0.8}``, or the first number in 0..1 of a reply that wrapped it in prose."""
    try:
        value = json.loads(reply.strip().removeprefix("```json").removesuffix("```"))
        if isinstance(value, dict):
            value = value.get("faithfulness")
        if isinstance(value, int | float) and 0 <= value <= 1:
            return float(value)
    except ValueError:
        pass
    match = _NUMBER.search(reply)
    return float(match.group()) if match else None
