"""Citation markers read while an answer streams, and the check that every number is cited (pure)."""

import pytest

from retrieval.citing import MarkerReader, uncited_numeric_sentences

pytestmark = pytest.mark.unit


def read(deltas: list[str], sources: int = 3) -> tuple[str, MarkerReader]:
    reader = MarkerReader(sources=sources)
    text = "".join(reader.feed(d) for d in deltas) + reader.flush()
    return text, reader


def test_a_marker_split_across_deltas_is_read_whole():
    text, reader = read(["The limit is 5 GB [", "2", "]. Retries wait [1", ", 3", "]."])
    assert text == "The limit is 5 GB [2]. Retries wait [1][3]."
    assert reader.cited == [2, 1, 3]
    assert reader.dropped == 0


def test_a_marker_naming_no_source_is_removed_and_counted():
    text, reader = read(["Use the queue [", "7]. It retries [1, 9", "]."])
    assert text == "Use the queue . It retries [1]."
    assert reader.cited == [1]
    assert reader.dropped == 2


def test_brackets_that_are_not_markers_pass_through():
    text, reader = read(["a list [a, b] and x[", "i] and [", "1"])
    assert text == "a list [a, b] and x[i] and [1"  # an unclosed marker at the end is text
    assert reader.cited == []


def test_a_sentence_with_a_number_and_no_citation_is_reported():
    text = "Uploads may be 25 MB [1]. Workers retry 3 times. The queue is named bulk.\n1. Check the 2 logs [2]"
    assert uncited_numeric_sentences(text) == ["Workers retry 3 times."]


def test_a_citation_after_the_full_stop_counts_for_the_sentence_before():
    assert uncited_numeric_sentences("Uploads may be 25 MB. [1] Nothing else.") == []


def test_list_numbers_and_markers_are_not_numbers_of_a_claim():
    assert uncited_numeric_sentences("1. Open the admin.\n2) Save the skill [1].") == []
