"""Ranking metrics over plain data, with trec_eval's definitions.

``run`` maps a query id to document ids, best first; ``qrels`` maps a query
id to {document id: graded relevance}. Queries without any relevant
document are skipped, as BEIR does.
"""

import math
import re
from collections.abc import Mapping, Sequence

_TOKEN = re.compile(r"[a-z0-9_]+")


def ndcg_at(ranking: Sequence[str], relevance: Mapping[str, int], k: int) -> float:
    """nDCG@k with linear gains (trec_eval's ndcg_cut)."""
    dcg = sum(relevance.get(doc, 0) / math.log2(rank + 1) for rank, doc in enumerate(ranking[:k], start=1))
    ideal = sorted((r for r in relevance.values() if r > 0), reverse=True)[:k]
    idcg = sum(gain / math.log2(rank + 1) for rank, gain in enumerate(ideal, start=1))
    return dcg / idcg if idcg else 0.0


def recall_at(ranking: Sequence[str], relevance: Mapping[str, int], k: int) -> float:
    relevant = {doc for doc, r in relevance.items() if r > 0}
    return len(relevant.intersection(ranking[:k])) / len(relevant) if relevant else 0.0


def mrr_at(ranking: Sequence[str], relevance: Mapping[str, int], k: int) -> float:
    for rank, doc in enumerate(ranking[:k], start=1):
        if relevance.get(doc, 0) > 0:
            return 1.0 / rank
    return 0.0


def evaluate(
    run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]], *, k: int = 10
) -> dict[str, float]:
    """Mean nDCG@k, Recall@k, Recall@100 and MRR@k over the judged queries."""
    judged = [q for q, rel in qrels.items() if any(r > 0 for r in rel.values())]
    if not judged:
        return {f"ndcg@{k}": 0.0, f"recall@{k}": 0.0, "recall@100": 0.0, f"mrr@{k}": 0.0}
    totals = {f"ndcg@{k}": 0.0, f"recall@{k}": 0.0, "recall@100": 0.0, f"mrr@{k}": 0.0}
    for query in judged:
        ranking, relevance = list(run.get(query, [])), qrels[query]
        totals[f"ndcg@{k}"] += ndcg_at(ranking, relevance, k)
        totals[f"recall@{k}"] += recall_at(ranking, relevance, k)
        totals["recall@100"] += recall_at(ranking, relevance, 100)
        totals[f"mrr@{k}"] += mrr_at(ranking, relevance, k)
    return {name: round(value / len(judged), 4) for name, value in totals.items()}


def tokens(text: str) -> set[str]:
    return set(_TOKEN.findall(text.lower()))


def token_overlap_rank(query: str, documents: Mapping[str, set[str]], *, limit: int = 100) -> list[str]:
    """The floor: seed 003's |query ∩ doc| / |query| over ``[a-z0-9_]+`` tokens."""
    wanted = tokens(query)
    if not wanted:
        return []
    scored = [(len(wanted & words) / len(wanted), doc) for doc, words in documents.items()]
    scored = [pair for pair in scored if pair[0] > 0]
    scored.sort(key=lambda pair: (-pair[0], pair[1]))
    return [doc for _, doc in scored[:limit]]


def hit_metrics(first_correct: Sequence[int | None], *, k: int = 10) -> dict[str, float]:
    """hit@1/5/k and MRR@k from each query's first correct rank (None: not found)."""
    count = len(first_correct) or 1
    report = {
        f"hit@{cut}": sum(1 for r in first_correct if r is not None and r <= cut) / count for cut in sorted({1, 5, k})
    }
    report[f"mrr@{k}"] = sum(1.0 / r for r in first_correct if r is not None and r <= k) / count
    return {name: round(value, 4) for name, value in report.items()}
