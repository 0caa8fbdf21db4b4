"""Rank fusion over plain data (no Django)."""

from collections.abc import Collection, Hashable, Mapping, Sequence
from typing import TypeVar

# An item's id, whatever its type: the fused list hands back the ids it was given.
Item = TypeVar("Item", bound=Hashable)


def rrf_fuse(
    rankings: Mapping[str, Sequence[Item]], *, k: int = 60, weights: Mapping[str, float] | None = None
) -> list[tuple[Item, float]]:
    """(Weighted) Reciprocal Rank Fusion: score(d) = sum of w_c / (k + rank_c(d)).

    ``rankings`` maps a channel name to ids, best first (rank 1); a channel's
    weight is looked up by its name up to the first ":" ("vector:3" uses
    "vector"), default 1. Ties keep first-seen order: the output is deterministic.
    """
    if k < 1:
        raise ValueError(f"RRF k must be >= 1, got {k}")
    scores: dict[Item, float] = {}
    for name, ids in rankings.items():
        weight = _weight(weights, name)
        for rank, item in enumerate(ids, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda pair: -pair[1])


def convex_fuse(
    scored: Mapping[str, Sequence[tuple[Item, float]]],
    *,
    weights: Mapping[str, float] | None = None,
    bounded: Collection[str] = ("vector",),
    minmax: bool = False,
) -> list[tuple[Item, float]]:
    """Weighted sum of per-channel normalised scores; absent from a channel = 0.

    A ``bounded`` channel (cosine similarity, already on one scale for every
    query) keeps its scores; any other channel (BM25, unbounded) is divided by
    its top score, so 0 still means "no match". Min-max over the candidates
    (``minmax``) instead stretches whatever range a query happens to have: a
    flat vector list then looks as decisive as a sharp one, which measured
    worse (see RAG_FUSION in settings).
    """
    scores: dict[Item, float] = {}
    for name, pairs in scored.items():
        if not pairs:
            continue
        values = [score for _, score in pairs]
        low, high = min(values), max(values)
        if minmax:
            offset, span = low, high - low
        elif name.split(":", 1)[0] in bounded:
            offset, span = 0.0, 1.0
        else:
            offset, span = 0.0, high
        weight = _weight(weights, name)
        for item, score in pairs:
            normalised = (score - offset) / span if span > 0 else 1.0
            scores[item] = scores.get(item, 0.0) + weight * normalised
    return sorted(scores.items(), key=lambda pair: -pair[1])


def _weight(weights: Mapping[str, float] | None, name: str) -> float:
    return (weights or {}).get(name.split(":", 1)[0], 1.0)
