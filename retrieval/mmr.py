"""Maximal Marginal Relevance over plain data (no Django)."""

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

import numpy as np

# An item's id, whatever its type: the order hands back the ids it was given.
Item = TypeVar("Item", bound=Hashable)


def mmr_order(
    ranked: Sequence[tuple[Item, float]],
    vectors: Mapping[Item, np.ndarray],
    *,
    lambda_: float = 0.7,
    k: int = 10,
) -> list[tuple[Item, float]]:
    """Re-order ``ranked`` (id, relevance) to trade relevance for diversity.

    Picks, one at a time, the item maximising
    ``lambda * relevance - (1 - lambda) * max cosine similarity to those picked``,
    with relevance min-max normalised over the pool. Items without a vector
    count as dissimilar to everything. Returns the picks with their relevance.
    """
    if not 0.0 <= lambda_ <= 1.0:
        raise ValueError(f"MMR lambda must be between 0 and 1, got {lambda_}")
    if not ranked:
        return []
    scores = [score for _, score in ranked]
    low, span = min(scores), (max(scores) - min(scores)) or 1.0
    relevance = {item: (score - low) / span for item, score in ranked}
    units = {item: v / (np.linalg.norm(v) or 1.0) for item, v in vectors.items() if item in relevance}
    picked: list[Item] = []
    remaining = [item for item, _ in ranked]
    closest = {item: 0.0 for item in remaining}  # max similarity to anything picked so far
    while remaining and len(picked) < k:
        best = max(remaining, key=lambda item: lambda_ * relevance[item] - (1 - lambda_) * closest[item])
        picked.append(best)
        remaining.remove(best)
        if best in units:
            for item in remaining:
                if item in units and units[item].shape == units[best].shape:
                    closest[item] = max(closest[item], float(units[item] @ units[best]))
    original = dict(ranked)
    return [(item, original[item]) for item in picked]
