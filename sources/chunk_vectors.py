"""Storing a batch of chunks' vectors: one UPDATE, the vectors sent as pgvector's binary form.

Django's ``bulk_update`` writes a ``CASE WHEN id = ...`` per row and column
(quadratic in the batch) and pgvector's adapter writes every float as text:
on the 2-core development machine that was about 0.75 ms of the indexing
process's CPU per chunk, more than all the rest it does for a chunk
(docs/benchmarks.md, `rag_bench index --encoder instant`). Here the ids
and the vectors go as two array parameters, the vectors as their float32
bytes, and one UPDATE joins them: about 6 ms of CPU per 1,000 chunks. The
stored values are the same (float32 both ways).

Binary parameters need psycopg's server-side binding, which Django's
cursors (client-side binding) do not use: the statement runs on a psycopg
cursor of the same connection, so it is inside whatever transaction Django
has open.
"""

import struct

import numpy as np
import psycopg
from django.db import connection
from psycopg.adapt import Dumper
from psycopg.pq import Format
from psycopg.types import TypeInfo

from sources.models import Chunk


class _VectorDumper(Dumper):
    """A float32 row as pgvector's binary ``vector``: dimensions, a reserved zero, then big-endian floats."""

    format = Format.BINARY

    def dump(self, obj: np.ndarray) -> bytes:
        return struct.pack(">HH", obj.shape[0], 0) + obj.astype(">f4", copy=False).tobytes()


def chunk_vectors_store(*, ids: list[int], vectors: np.ndarray, embedded_as: str) -> int:
    """Give chunk ``ids[i]`` the vector ``vectors[i]``, no longer pending, embedded as ``embedded_as``.

    One statement for the batch; a chunk deleted meanwhile is simply not
    updated. Returns how many rows were.
    """
    if len(ids) != len(vectors):
        raise ValueError(f"{len(ids)} chunk ids for {len(vectors)} vectors")
    if not ids:
        return 0
    connection.ensure_connection()
    raw = connection.connection
    assert raw is not None  # just ensured
    info = TypeInfo.fetch(raw, "vector")  # the extension's type oids are the database's own
    if info is None:
        raise RuntimeError("the pgvector extension is not installed in this database")
    with psycopg.Cursor(raw) as cursor:
        info.register(cursor)
        dumper = type("VectorDumper", (_VectorDumper,), {"oid": info.oid})
        cursor.adapters.register_dumper(np.ndarray, dumper)
        cursor.execute(
            f"UPDATE {Chunk._meta.db_table} AS c "
            "SET embedding = v.embedding, vector_pending = false, embedded_as = %s "
            "FROM unnest(%s::bigint[], %b::vector[]) AS v(id, embedding) WHERE c.id = v.id",
            [embedded_as, list(ids), list(np.asarray(vectors, dtype=np.float32))],
        )
        return cursor.rowcount
