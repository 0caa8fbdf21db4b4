"""The context's relevance floor and its margin below the closest hit (retrieval/context.py, context_floored): pure,
on hits built in memory."""

import pytest

from retrieval.context import context_floored
from retrieval.search import ChannelScore, Hit
from sources.models import Chunk, Source

pytestmark = pytest.mark.unit


def hit(path: str, similarity: float | None) -> Hit:
    chunk = Chunk(source=Source(kind=Source.Kind.FILE, key=f"k:{path}"), path=path, start_line=1, end_line=5)
    channels = {"lexical": ChannelScore(1, 3.0)}
    if similarity is not None:
        channels["vector"] = ChannelScore(1, similarity)
    return Hit(chunk=chunk, score=0.5, channels=channels)


def kept(hits: dict, **rule) -> list[str]:
    close, _ = context_floored(hits, **rule)
    return [h.chunk.path for found in close.values() for h in found]


def test_the_floor_alone_keeps_what_clears_it_and_what_only_words_found():
    hits = {"file": [hit("a.py", 0.34), hit("b.py", 0.27), hit("words.py", None)], "skill": [hit("s.md", 0.2)]}
    assert kept(hits, floor=0.3) == ["a.py", "words.py"]
    _, dropped = context_floored(hits, floor=0.3)
    assert {d.citation.split(":")[0] for d in dropped} == {"b.py", "s.md"}
    assert all("0.30 needed (RAG_CONTEXT_MIN_SIMILARITY)" in d.reason for d in dropped)


def test_a_margin_keeps_hits_near_the_closest_one_when_that_one_clears_the_floor():
    # Found by meaning at 0.34 at best (code scores low throughout): 0.27 is within 0.1 of it, 0.2 is not.
    hits = {"file": [hit("a.py", 0.34), hit("b.py", 0.27), hit("c.py", 0.2)]}
    assert kept(hits, floor=0.3, margin=0.1) == ["a.py", "b.py"]
    _, dropped = context_floored(hits, floor=0.3, margin=0.1)
    assert [d.citation.split(":")[0] for d in dropped] == ["c.py"] and "0.24 needed" in dropped[0].reason
    # A close best hit lifts nothing under the floor: the margin never raises it, never lowers it past best - m.
    assert kept({"file": [hit("a.py", 0.7), hit("b.py", 0.27)]}, floor=0.3, margin=0.1) == ["a.py"]
    # Measured by meaning, a word-only hit counts as fully close; it does not make every other hit "near".
    assert kept({"file": [hit("w.py", None), hit("b.py", 0.27)]}, floor=0.3, margin=0.1) == ["w.py"]


def test_a_query_no_hit_clears_the_floor_for_gets_nothing_whatever_the_margin():
    hits = {"file": [hit("a.py", 0.29), hit("b.py", 0.25)], "skill": [hit("s.md", 0.28)]}
    assert kept(hits, floor=0.3, margin=0.15) == []
