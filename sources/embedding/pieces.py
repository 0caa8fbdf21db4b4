"""Texts longer than a model reads, cut into pieces it can read whole.

A sentence-transformers model silently drops every word piece past its
``max_seq_length`` (256 for all-MiniLM-L6-v2: about 900 characters of
English, less of code). Embedding each piece and averaging the normalised
vectors lets the whole chunk count. Pure functions over token offsets.
"""

from collections.abc import Sequence

import numpy as np


def text_pieces(text: str, offsets: Sequence[tuple[int, int]], limit: int) -> list[str]:
    """``text`` cut into pieces of at most ``limit`` tokens, at a line break when one is near.

    ``offsets`` are the (start, end) characters of each token, as a fast
    tokenizer's ``return_offsets_mapping`` gives them (special tokens excluded).
    """
    if len(offsets) <= limit:
        return [text]
    pieces = []
    start = 0  # character where the current piece begins
    token = 0
    while token + limit < len(offsets):
        cut = offsets[token + limit][0]
        # Prefer the last line break in the piece's second half: whole lines embed better.
        newline = text.rfind("\n", start + (cut - start) // 2, cut)
        if newline > start:
            cut = newline + 1
        pieces.append(text[start:cut])
        start = cut
        while token < len(offsets) and offsets[token][0] < cut:
            token += 1
    pieces.append(text[start:])
    return [piece for piece in pieces if piece.strip()] or [text]


def pieces_pool(vectors: np.ndarray, owners: Sequence[int], count: int) -> np.ndarray:
    """One unit vector per text: the normalised mean of its pieces' vectors."""
    pooled = np.zeros((count, vectors.shape[1]), dtype=np.float32)
    np.add.at(pooled, np.asarray(owners), vectors)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return pooled / np.where(norms > 0, norms, 1.0)
