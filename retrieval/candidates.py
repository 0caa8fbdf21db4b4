"""Candidate lists and the pure steps between the channels and the pool: threshold, fuse, group.

No database here: each candidate carries what these steps need (its
source and path), so they run over plain data.
"""

import enum
from collections.abc import Iterable
from dataclasses import dataclass, replace

from retrieval.choices import FusionMethod
from retrieval.fusion import convex_fuse, rrf_fuse


class ChannelKind(enum.StrEnum):
    LEXICAL = "lexical"
    VECTOR = "vector"


@dataclass(frozen=True, slots=True)
class Channel:
    """Where a candidate list came from: the lexical channel, or the vector channel of one model."""

    kind: ChannelKind
    model_id: int | None = None

    @property
    def name(self) -> str:
        """ "lexical" or "vector:<model id>": how warnings name it, and fusion's key (its weight goes by kind)."""
        return self.kind.value if self.model_id is None else f"{self.kind.value}:{self.model_id}"


LEXICAL = Channel(ChannelKind.LEXICAL)


@dataclass(frozen=True, slots=True)
class Candidate:
    chunk_id: int
    rank: int
    score: float
    source_id: int = 0
    path: str = ""  # a root's segment is one source of many files: grouping tells them apart by path
    threshold: float = 0.0  # vector candidates: their source's similarity threshold
    symbol: str = ""  # code: the name the chunk defines (``ChangeList.get_filters``), for preferring definitions
    language: str = ""  # the chunker's, for telling code from stylesheets and data
    # Vector candidates found with feedback (retrieval/vector_feedback.py): their cosine to the feedback vector, which
    # ranked them and is what fusion adds; ``score`` stays the cosine to the query, which thresholds, "no good match"
    # and the context's closeness read. None: fusion adds ``score``.
    fusion_score: float | None = None
    # Lexical candidates: written words first, still waiting for a vector of its own (sources/pipeline/vectors.py).
    pending: bool = False

    @property
    def fused_score(self) -> float:
        return self.score if self.fusion_score is None else self.fusion_score


@dataclass(frozen=True, slots=True)
class CandidateList:
    channel: Channel
    candidates: tuple[Candidate, ...]


@dataclass(frozen=True, slots=True)
class Scored:
    """A fused candidate: its score in the fused order, the source and path it groups by, what code preferences
    read (retrieval/code_preference.py)."""

    chunk_id: int
    score: float
    source_id: int
    path: str
    symbol: str = ""
    language: str = ""


def thresholded(lists: list[CandidateList]) -> list[CandidateList]:
    """Vector matches below their threshold dropped, unless lexical found them too (keyword relevance rescues them)."""
    lexical = {c.chunk_id for found in lists if found.channel.kind == ChannelKind.LEXICAL for c in found.candidates}
    kept = []
    for found in lists:
        if found.channel.kind == ChannelKind.VECTOR:
            passing = [c for c in found.candidates if c.score >= c.threshold or c.chunk_id in lexical]
            found = CandidateList(
                found.channel,
                tuple(replace(c, rank=rank) for rank, c in enumerate(passing, start=1)),
            )
        kept.append(found)
    return kept


def fused(lists: list[CandidateList], *, method: FusionMethod, lexical_weight: float, rrf_k: int) -> list[Scored]:
    """One order for several lists (lexical + vector, or several models' vector lists); one list keeps its own."""
    where = {c.chunk_id: (c.source_id, c.path, c.symbol, c.language) for found in lists for c in found.candidates}
    if len(lists) > 1 and (waiting := words_only(lists)) is not None:
        lists = [*lists, waiting]
    if len(lists) <= 1:
        pairs = [(c.chunk_id, c.score) for found in lists for c in found.candidates]
    else:
        weights = {ChannelKind.LEXICAL.value: lexical_weight, ChannelKind.VECTOR.value: 1.0}
        if method in (FusionMethod.CONVEX, FusionMethod.MINMAX):
            pairs = convex_fuse(
                {found.channel.name: [(c.chunk_id, c.fused_score) for c in found.candidates] for found in lists},
                weights=weights,
                minmax=method == FusionMethod.MINMAX,
            )
        else:
            pairs = rrf_fuse(
                {found.channel.name: [c.chunk_id for c in found.candidates] for found in lists},
                k=rrf_k,
                weights=weights,
            )
    return [Scored(chunk_id, score, *where[chunk_id]) for chunk_id, score in pairs]


WAITING = Channel(ChannelKind.VECTOR, 0)  # no model has id 0: the stand-in list of the chunks waiting for vectors


def words_only(lists: list[CandidateList]) -> CandidateList | None:
    """A vector list's stand-in for chunks found by words that have no vector yet, or None when there are none.

    A chunk written words first (a new root still being embedded) is in no vector list, and fusion would rank it
    below every chunk both channels found. Here it gets, in place of a cosine, the best vector score of the query
    scaled by its share of the best lexical score: so it ranks by its lexical score alone, on the fused scale.
    """
    vector = [c for found in lists if found.channel.kind == ChannelKind.VECTOR for c in found.candidates]
    lexical = [c for found in lists if found.channel.kind == ChannelKind.LEXICAL for c in found.candidates]
    seen = {c.chunk_id for c in vector}
    waiting = [c for c in lexical if c.pending and c.chunk_id not in seen]
    if not waiting or not vector:
        return None
    top_vector = max(c.fused_score for c in vector)
    top_lexical = max(c.score for c in lexical)
    if top_lexical <= 0:
        return None
    return CandidateList(
        WAITING,
        tuple(
            replace(c, rank=rank, score=top_vector * c.score / top_lexical, fusion_score=None)
            for rank, c in enumerate(waiting, start=1)
        ),
    )


def best_per_source(order: Iterable[Scored]) -> list[Scored]:
    """The best chunk of each source (of each file, for a root's segment), in order."""
    seen: set[tuple[int, str]] = set()
    best = []
    for item in order:
        if (item.source_id, item.path) not in seen:
            seen.add((item.source_id, item.path))
            best.append(item)
    return best


def group_rest(order: Iterable[Scored], heads: Iterable[int], *, per_group: int) -> dict[int, tuple[Scored, ...]]:
    """For each head chunk (a group's best, as ``best_per_source`` kept it), up to ``per_group`` more chunks of its
    source and path, in ``order``: the snippets a grouped result shows under its best chunk."""
    wanted = set(heads)
    where: dict[tuple[int, str], int] = {}
    rest: dict[int, list[Scored]] = {}
    for item in order:
        key = (item.source_id, item.path)
        if item.chunk_id in wanted:
            where[key] = item.chunk_id
            rest[item.chunk_id] = []
        elif key in where and len(rest[where[key]]) < per_group:
            rest[where[key]].append(item)
    return {head: tuple(items) for head, items in rest.items()}
