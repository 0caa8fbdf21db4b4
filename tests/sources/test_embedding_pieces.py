import re

import numpy as np
import pytest

from sources.embedding.pieces import pieces_pool, text_pieces

pytestmark = pytest.mark.unit


def words(text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]


def test_a_text_within_the_limit_is_one_piece():
    assert text_pieces("a b c", words("a b c"), 3) == ["a b c"]


def test_long_texts_are_cut_at_line_breaks_into_pieces_the_model_reads_whole():
    text = "".join(f"line {i} has five words\n" for i in range(40))
    pieces = text_pieces(text, words(text), 23)
    assert "".join(pieces) == text  # nothing lost, nothing repeated
    assert all(len(words(piece)) <= 23 for piece in pieces)
    assert all(piece.endswith("\n") for piece in pieces)  # whole lines


def test_a_single_huge_line_is_cut_by_tokens():
    text = " ".join(f"w{i}" for i in range(100))
    pieces = text_pieces(text, words(text), 30)
    assert len(pieces) == 4 and "".join(pieces) == text
    assert all(len(words(piece)) <= 30 for piece in pieces)


def test_pooled_vectors_are_unit_means_of_their_pieces():
    vectors = np.array([[1, 0], [0, 1], [1, 0]], dtype=np.float32)
    pooled = pieces_pool(vectors, [0, 0, 1], 2)
    assert pooled[0] == pytest.approx([2**-0.5, 2**-0.5])
    assert pooled[1] == pytest.approx([1, 0])


def test_with_pieces_the_end_of_a_long_chunk_counts_for_the_real_model():
    from sources.embedding import embedder_for

    embedder = embedder_for(provider="local", name="all-MiniLM-L6-v2")
    text = "Boil the pasta in salted water and stir the tomato sauce.\n" * 40
    text += "The zeppelin airship crossed the Atlantic in three days.\n" * 3
    query = embedder.embed(["airship flight across the ocean"])[0]
    truncated, pieced = embedder.embed([text])[0], embedder.embed([text], pieces=True)[0]
    assert float(np.linalg.norm(pieced)) == pytest.approx(1.0, abs=1e-5)
    assert float(pieced @ query) > float(truncated @ query) + 0.05
