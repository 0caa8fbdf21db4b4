"""The candidate channels' shared parts and the vector channel; lexical.py has the lexical one.

The filter sits in the SQL of both channels (never applied afterwards), so a
chunk outside the caller's scope cannot leak through either one. Only each
source's active generation is read, so a model switch in progress is
invisible until it flips.
"""

from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.db.models.expressions import RawSQL

from sources.models import EmbeddingModel


@dataclass(frozen=True, slots=True)
class Scope:
    """What a caller may see, as SQL. ``retrieval.access.scope_for`` builds it from an identity.

    A source is visible when its ``bot_id`` is empty (shared) or one of
    ``bot_ids``, its ``client_id`` empty or one of ``client_ids``, and its
    ``channels`` empty (ungated) or sharing one with ``channels``. ``None``
    in a dimension means any value (superusers, internal commands). The
    default sees shared, ungated sources only: an unknown caller fails closed.
    """

    bot_ids: tuple[str, ...] | None = ()
    client_ids: tuple[str, ...] | None = ()
    channels: tuple[str, ...] | None = ()
    kinds: tuple[str, ...] = ()  # empty = every kind of source but evaluation datasets
    source_ids: tuple[int, ...] = ()  # empty = every source

    def source_sql(self, *, enabled_only: bool = True) -> tuple[str, list]:
        """A WHERE fragment over sources ``s``, and its parameters: the one scope rule in SQL."""
        clauses = ["s.enabled"] if enabled_only else ["TRUE"]
        params: list = []
        if self.bot_ids is not None:
            clauses.append("(s.bot_id = '' OR s.bot_id = ANY(%s::text[]))")
            params.append(list(self.bot_ids))
        if self.client_ids is not None:
            clauses.append("(s.client_id = '' OR s.client_id = ANY(%s::text[]))")
            params.append(list(self.client_ids))
        if self.channels is not None:
            clauses.append("(cardinality(s.channels) = 0 OR s.channels::text[] && %s::text[])")
            params.append(list(self.channels))
        if self.kinds:
            clauses.append("s.kind = ANY(%s::text[])")
            params.append(list(self.kinds))
        else:
            clauses.append("s.kind <> 'dataset'")  # kept eval data never shows in real searches
        if self.source_ids:
            clauses.append("s.id = ANY(%s::bigint[])")
            params.append(list(self.source_ids))
        return " AND ".join(clauses), params

    def sql(self) -> tuple[str, list]:
        """A WHERE fragment over chunks ``c`` joined to sources ``s``: visible sources, active generation only."""
        where, params = self.source_sql()
        return "c.generation = s.active_generation AND " + where, params

    def sql_named(self) -> tuple[str, dict]:
        """``sql()`` with named placeholders (%(scope0)s, ...) for queries using named parameters."""
        return _named(*self.sql())

    def source_sql_named(self) -> tuple[str, dict]:
        """``source_sql()`` with named placeholders, like ``sql_named()``."""
        return _named(*self.source_sql())

    def source_ids_sql(self, *, enabled_only: bool = True) -> RawSQL:
        """The visible sources' ids as a subquery, for ORM filters (``source__in=scope.source_ids_sql()``)."""
        where, params = self.source_sql(enabled_only=enabled_only)
        return RawSQL(f"SELECT s.id FROM sources_source s WHERE {where}", params)


def _named(where: str, params: list) -> tuple[str, dict]:
    names = [f"scope{i}" for i in range(len(params))]
    return where.replace("%s", "{}").format(*(f"%({name})s" for name in names)), dict(zip(names, params))


@dataclass(frozen=True, slots=True)
class Candidate:
    chunk_id: int
    rank: int
    score: float
    threshold: float = 0.0  # vector candidates: their source's similarity threshold


def visible_models(*, scope: Scope) -> list[EmbeddingModel]:
    """The models whose vectors this scope can see (one vector query each)."""
    where, params = scope.source_sql()
    ids = EmbeddingModel.objects.raw(
        f"SELECT DISTINCT m.* FROM sources_embeddingmodel m JOIN sources_source s ON s.embedding_model_id = m.id WHERE {where}",
        params,
    )
    return list(ids)


def vector_candidates(*, vector: np.ndarray, model: EmbeddingModel, scope: Scope, limit: int) -> list[Candidate]:
    """Nearest chunks of one model by cosine similarity, through its HNSW index."""
    dims = int(model.dimensions)
    where, params = scope.sql()
    # The expression and predicate match the partial index exactly, so the
    # planner can use it; iterative scans keep returning rows when the scope
    # filter removes many of the nearest ones.
    sql = f"""
        SELECT c.id, 1 - (c.embedding::halfvec({dims}) <=> %s::halfvec({dims})) AS score,
               COALESCE(s.similarity_threshold,
                        CASE s.kind WHEN 'skill' THEN %s WHEN 'file' THEN %s WHEN 'tool' THEN %s ELSE 0.0 END) AS threshold
        FROM sources_chunk c JOIN sources_source s ON s.id = c.source_id
        WHERE c.embedding_model_id = {int(model.pk)} AND {where}
        ORDER BY c.embedding::halfvec({dims}) <=> %s::halfvec({dims})
        LIMIT %s
    """
    literal = "[" + ",".join(f"{x:.7g}" for x in vector.tolist()) + "]"
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', 'relaxed_order', true)",
            [str(max(settings.RAG_HNSW_EF_SEARCH, limit))],
        )
        cursor.execute(sql, [literal, *_thresholds(), *params, literal, limit])
        rows = cursor.fetchall()
    return [Candidate(chunk_id=row[0], rank=rank, score=float(row[1]), threshold=float(row[2])) for rank, row in enumerate(rows, start=1)]


def _thresholds() -> tuple[float, float, float]:
    # Evaluation datasets have none: the eval measures ranking, not cut-offs.
    return (settings.RAG_SIMILARITY_THRESHOLD_SKILL, settings.RAG_SIMILARITY_THRESHOLD_FILE,
            settings.RAG_SIMILARITY_THRESHOLD_TOOL)
