"""Chunk ids as callers see them: stable and distinct, but telling nothing of the chunk table's sequence.

A chunk's primary key comes from one sequence shared by every tenant: the
ids of a caller's re-indexed chunks would tell it how many chunks others
indexed meanwhile (issue 22, finding 7). The API and MCP hits carry instead
a keyed permutation of the key, so two hits of one chunk still compare
equal and no two chunks share an id. No endpoint takes a chunk id, so
nothing maps it back. The edge passes SECRET_KEY (AnswerConfig). Ids change when it does, as they already do
whenever a chunk is re-indexed.
"""

import hashlib
import hmac
from functools import lru_cache

# 52-bit ids, permuted as two 26-bit halves: exact as JSON numbers read into
# doubles (JavaScript's integers end at 2**53). Higher bits, which a
# bigserial will not reach, pass through, so the map stays one-to-one.
_HALF_BITS = 26
_HALF_MASK = (1 << _HALF_BITS) - 1
_ID_MASK = (1 << (2 * _HALF_BITS)) - 1
# Four Feistel rounds over a pseudorandom function make a pseudorandom permutation (Luby-Rackoff).
_ROUNDS = 4


@lru_cache(maxsize=4)
def _key(secret: str) -> bytes:
    # Its own key, derived: the chunk ids never expose anything signed with SECRET_KEY itself.
    return hashlib.sha256(b"rag-site chunk ids\x00" + secret.encode()).digest()


def _round(key: bytes, number: int, half: int) -> int:
    digest = hmac.new(key, bytes([number]) + half.to_bytes(4, "big"), hashlib.sha256).digest()
    return int.from_bytes(digest[:4], "big") & _HALF_MASK


def chunk_public_id(pk: int, *, secret: str) -> int:
    """The id a caller sees for chunk ``pk``: the same for every hit of the chunk, distinct across chunks."""
    key = _key(secret)
    left, right = (pk >> _HALF_BITS) & _HALF_MASK, pk & _HALF_MASK
    for number in range(_ROUNDS):
        left, right = right, left ^ _round(key, number, right)
    return (pk & ~_ID_MASK) | (left << _HALF_BITS) | right
