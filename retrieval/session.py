"""A search's first and last round trips, around its channels.

The first applies the search's settings to the statements after it: the
statement timeout that bounds each channel's SQL (a channel that runs too
long is cancelled by PostgreSQL and skipped), and the HNSW search's. In the
same statement it reads what the channels plan with: the embedding models
the scope can see (the query is embedded for each while the lexical SQL
runs) and the lexical collection's statistics (retrieval/lexical.py). The
last round trip puts the settings back.

Session settings, put back, rather than SET LOCAL: a search usually runs
in autocommit, where a local setting ends with its own statement, and a
transaction of its own would cost two round trips (BEGIN and COMMIT) to
this one. The first statement itself runs before the timeout applies.
"""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from access.scope import Scope
from kernel.replicas import read_connection
from retrieval.config import SearchConfig
from retrieval.lexical import COLLECTION_COLUMNS, Collection, collection_read, collection_sql
from retrieval.vector import ef_search_sql, hnsw_settings_sql, models_sql
from sources.models import EmbeddingModel

# The model fields the query's embedding and the vector channel use; the others are left deferred.
_MODEL_FIELDS = ("id", "provider", "name", "dimensions", "normalized")

# current_setting before set_config in one row: a target list is evaluated left to right.
_OPEN = """
    WITH previous AS MATERIALIZED (
        SELECT current_setting('statement_timeout') AS statement_timeout,
               NULLIF(current_setting('hnsw.ef_search', true), '') AS ef_search,
               NULLIF(current_setting('hnsw.iterative_scan', true), '') AS iterative_scan,
               set_config('statement_timeout', %(statement_timeout)s, false){hnsw}
    )
    SELECT previous.statement_timeout, previous.ef_search, previous.iterative_scan, {models} AS models{lexical_columns}
    FROM previous{lexical_join}
"""

_MODELS = """(SELECT coalesce(json_agg(json_build_object({fields}) ORDER BY m.id), '[]'::json) FROM ({models}) AS m)"""

_RESTORE_TIMEOUT = "set_config('statement_timeout', %(statement_timeout)s, false)"
# A NULL value resets a setting: the HNSW ones were unset when pgvector had not run in this session yet.
# Read back, such a reset placeholder is '' (NULLIF above): restoring '' once pgvector has loaded in the
# session is refused ('invalid value for parameter "hnsw.ef_search"'), restoring NULL is not.
_RESTORE_HNSW = (
    "set_config('hnsw.ef_search', %(ef_search)s, false), set_config('hnsw.iterative_scan', %(iterative_scan)s, false)"
)


@dataclass(frozen=True, slots=True)
class Opened:
    models: list[EmbeddingModel]  # empty unless the search has a vector channel
    collection: Collection | None  # None unless it has a lexical channel
    seconds: float  # the first round trip's


@contextmanager
def search_session(
    *,
    scope: Scope,
    lexical_query: str | None,
    vector: bool,
    limit: int,
    config: SearchConfig,
) -> Iterator[Opened]:
    """The search's settings for the block; the models it embeds for (``vector``) and the lexical statistics of
    ``lexical_query`` (None: no lexical channel)."""
    started = time.perf_counter()
    sql, params = _open_sql(scope=scope, lexical_query=lexical_query, vector=vector, limit=limit, config=config)
    connection = read_connection()  # a replica's inside replica_reads(): the whole search reads there
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    previous = dict(zip(("statement_timeout", "ef_search", "iterative_scan"), rows[0][:3], strict=True))
    models = [
        EmbeddingModel.from_db(connection.alias, list(_MODEL_FIELDS), [fields[name] for name in _MODEL_FIELDS])
        for fields in rows[0][3]
    ]
    collection = collection_read([row[4:] for row in rows]) if lexical_query is not None else None
    try:
        yield Opened(models=models, collection=collection, seconds=time.perf_counter() - started)
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {_RESTORE_TIMEOUT}" + (f", {_RESTORE_HNSW}" if vector else ""), previous)


def _open_sql(
    *, scope: Scope, lexical_query: str | None, vector: bool, limit: int, config: SearchConfig
) -> tuple[str, dict]:
    params: dict = {"statement_timeout": f"{config.statement_timeout_ms}ms"}
    hnsw = models = ""
    if vector:
        setting = ef_search_sql(floor="%(ef_search)s", scale_chunks=config.hnsw_ef_search_scale_chunks)
        hnsw = ",\n" + hnsw_settings_sql(ef_search=setting, is_local="false")
        params["ef_search"] = str(max(config.hnsw_ef_search, limit))
        visible, scope_params = models_sql(scope)
        params.update(scope_params)
        models = _MODELS.format(fields=", ".join(f"'{name}', m.{name}" for name in _MODEL_FIELDS), models=visible)
    lexical_columns = lexical_join = ""
    if lexical_query is not None:
        collection, collection_params = collection_sql(query=lexical_query, scope=scope)
        params.update(collection_params)  # the same scope parameters as the models'
        lexical_columns = "".join(f", lexical.c{number}" for number in range(COLLECTION_COLUMNS))
        columns = ", ".join(f"c{number}" for number in range(COLLECTION_COLUMNS))
        lexical_join = f" LEFT JOIN ({collection}) AS lexical({columns}) ON TRUE"
    return _OPEN.format(
        hnsw=hnsw, models=models or "'[]'::json", lexical_columns=lexical_columns, lexical_join=lexical_join
    ), params
