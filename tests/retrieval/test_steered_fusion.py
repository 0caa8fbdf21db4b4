"""Fusion after the lexical channel's first hits steered the vector search (issue 29): the moved vector ranks
alone, lexical-only finds after it; without steering (code, names, or rag_eval's fused-nolexfb row) the weight is
as before."""

from dataclasses import replace

import pytest

from retrieval.candidates import LEXICAL, Candidate, CandidateList, Channel, ChannelKind
from retrieval.config import SearchConfig
from retrieval.search import Mode, _fused
from retrieval.vector_feedback import Feedback

pytestmark = pytest.mark.unit

QUESTION = "what causes the tides to rise twice a day"


def lists(*, moved: bool) -> list[CandidateList]:
    # Chunk 3: the lexical channel's best, close in meaning to nothing; 1 and 2: the vector channel's.
    lexical = CandidateList(LEXICAL, (Candidate(chunk_id=3, rank=1, score=9.0), Candidate(2, 2, 8.0)))
    fusion = (0.80, 0.79) if moved else (None, None)
    vector = CandidateList(
        Channel(ChannelKind.VECTOR, 1),
        (
            Candidate(chunk_id=1, rank=1, score=0.70, fusion_score=fusion[0]),
            Candidate(chunk_id=2, rank=2, score=0.69, fusion_score=fusion[1]),
        ),
    )
    return [lexical, vector]


def config(**changes) -> SearchConfig:
    return replace(SearchConfig.from_settings(), **changes)


def test_a_steered_question_ranks_by_the_moved_vector_and_keeps_lexical_finds_after_it():
    order = _fused(QUESTION, lists(moved=True), mode=Mode.HYBRID, config=config())
    assert [item.chunk_id for item in order] == [1, 2, 3]
    assert [item.score for item in order] == pytest.approx([0.80, 0.79, 0.0])


def test_without_steering_the_lexical_channel_still_adds_its_share():
    for moved, lexical_feedback in ((False, True), (True, False)):
        order = _fused(QUESTION, lists(moved=moved), mode=Mode.HYBRID, config=config(lexical_feedback=lexical_feedback))
        assert [item.chunk_id for item in order][0] == 2  # found by both channels


def test_the_lexical_hits_and_their_weight_are_checked():
    with pytest.raises(ValueError, match="lexical"):
        Feedback(lexical_weight=-1.0)
    with pytest.raises(ValueError, match="lexical"):
        Feedback(lexical=-1)
