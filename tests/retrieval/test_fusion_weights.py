import pytest

from retrieval.candidates import Candidate
from retrieval.fusion_weights import ASKED_GAIN, NAME_WEIGHT, STEERED_WEIGHT, lexical_weight
from retrieval.query_shape import QueryShape

pytestmark = pytest.mark.unit


def cosines(*scores: float) -> list[Candidate]:
    return [Candidate(chunk_id=n, rank=n, score=s) for n, s in enumerate(scores, start=1)]


def test_a_name_weighs_the_lexical_channel_fully():
    assert lexical_weight(base=0.1, shape=QueryShape.IDENTIFIER, vector=cosines(0.9)) == NAME_WEIGHT
    assert lexical_weight(base=0.1, shape=QueryShape.SYMBOL, vector=cosines(0.9)) == NAME_WEIGHT


def test_a_question_the_vector_channel_is_sure_of_keeps_the_base_weight():
    assert lexical_weight(base=0.1, shape=QueryShape.QUESTION, vector=cosines(0.8, 0.7)) == 0.1


def test_the_less_sure_the_vector_channel_the_more_the_lexical_channel_weighs():
    sure, unsure, none = (
        lexical_weight(base=0.1, shape=QueryShape.QUESTION, vector=cosines(best)) for best in (0.55, 0.3, 0.0)
    )
    assert 0.1 < sure < unsure < none
    assert lexical_weight(base=0.1, shape=QueryShape.QUESTION, vector=[]) == none


def test_a_question_whose_vector_search_the_lexical_hits_steered_is_not_given_their_scores_again():
    for best in (0.8, 0.3):
        assert lexical_weight(base=0.1, shape=QueryShape.QUESTION, vector=cosines(best), steered=True) == STEERED_WEIGHT
    assert lexical_weight(base=0.1, shape=QueryShape.IDENTIFIER, vector=cosines(0.9), steered=True) == NAME_WEIGHT


def test_a_question_a_person_asks_weighs_the_lexical_channel_more_than_a_description():
    for best in (0.8, 0.3):
        described = lexical_weight(base=0.1, shape=QueryShape.QUESTION, vector=cosines(best))
        asked = lexical_weight(base=0.1, shape=QueryShape.QUESTION, vector=cosines(best), asked=True)
        assert asked == pytest.approx(described * ASKED_GAIN) and ASKED_GAIN > 1
    # Steered, the lexical evidence is already in the vector: asking changes nothing.
    assert lexical_weight(base=0.1, shape=QueryShape.QUESTION, vector=cosines(0.8), steered=True, asked=True) == 0
