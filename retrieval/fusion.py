"""Rank fusion over plain data (no Django)."""

from collections.abc import Hashable, Mapping, Sequence


def rrf_fuse(rankings: Mapping[str, Sequence[Hashable]], *, k: int = 60) -> list[tuple[Hashable, float]]:
    """Reciprocal Rank Fusion: score(d) = sum over channels of 1 / (k + rank).

    ``rankings`` maps a channel name to ids, best first (rank 1). Ties keep
    the order in which ids were first seen, so the output is deterministic.
    """
    if k < 1:
        raise ValueError(f"RRF k must be >= 1, got {k}")
    scores: dict[Hashable, float] = {}
    for ids in rankings.values():
        for rank, item in enumerate(ids, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda pair: -pair[1])
