"""SQL of migration 0002: triggers that keep the lexical index (retrieval/models/lexical.py) in step with sources_chunk.

Frozen here, as a migration must be: a later change to the field weights or
to k1 and b needs a new migration that replaces these functions and rebuilds
the index (TRUNCATE the three tables, then run BACKFILL).

Constants, the same as retrieval/lexical.py's (a test compares them):
field weights A 4, B 2, C and D 1; k1 1.2, b 0.75; REFERENCE_LENGTH 40
(the impact's stand-in for the average length, about a chunk's distinct
lexemes). Statement-level triggers with transition tables: one INSERT of
10,000 chunks costs three set-based statements, not 10,000 row triggers.
Statistics rows are upserted in key order, so concurrent writers of the
same source take their row locks in one order and cannot deadlock.
"""

_TF = "coalesce((SELECT sum(CASE w WHEN 'A' THEN 4 WHEN 'B' THEN 2 ELSE 1 END) FROM unnest(u.weights) AS w), 1)::real"


def _add(rows: str) -> str:
    return f"""
    INSERT INTO retrieval_posting (source_id, generation, lexeme, chunk_id, tf, dl, impact)
    SELECT r.source_id, r.generation, u.lexeme, r.id, t.tf, length(r.search_vector),
           t.tf * 2.2 / (t.tf + 1.2 * (0.25 + 0.75 * length(r.search_vector) / 40.0))
    FROM {rows} AS r, unnest(r.search_vector) AS u, LATERAL (SELECT {_TF} AS tf) AS t;
    INSERT INTO retrieval_term (lexeme, source_id, generation, df)
    SELECT u.lexeme, r.source_id, r.generation, count(*)
    FROM {rows} AS r, unnest(tsvector_to_array(r.search_vector)) AS u(lexeme)
    GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (lexeme, source_id, generation) DO UPDATE SET df = retrieval_term.df + excluded.df;
    INSERT INTO retrieval_lexical_source (source_id, generation, chunks, total_dl)
    SELECT r.source_id, r.generation, count(*), coalesce(sum(length(r.search_vector)), 0)
    FROM {rows} AS r GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (source_id, generation) DO UPDATE
        SET chunks = retrieval_lexical_source.chunks + excluded.chunks,
            total_dl = retrieval_lexical_source.total_dl + excluded.total_dl;
"""


def _remove(rows: str) -> str:
    return f"""
    DELETE FROM retrieval_posting AS p
    USING {rows} AS r, unnest(tsvector_to_array(r.search_vector)) AS u(lexeme)
    WHERE p.source_id = r.source_id AND p.generation = r.generation AND p.lexeme = u.lexeme AND p.chunk_id = r.id;
    INSERT INTO retrieval_term (lexeme, source_id, generation, df)
    SELECT u.lexeme, r.source_id, r.generation, -count(*)
    FROM {rows} AS r, unnest(tsvector_to_array(r.search_vector)) AS u(lexeme)
    GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (lexeme, source_id, generation) DO UPDATE SET df = retrieval_term.df + excluded.df;
    DELETE FROM retrieval_term AS t
    USING (SELECT DISTINCT u.lexeme, r.source_id, r.generation
           FROM {rows} AS r, unnest(tsvector_to_array(r.search_vector)) AS u(lexeme)) AS g
    WHERE t.lexeme = g.lexeme AND t.source_id = g.source_id AND t.generation = g.generation AND t.df <= 0;
    INSERT INTO retrieval_lexical_source (source_id, generation, chunks, total_dl)
    SELECT r.source_id, r.generation, -count(*), -coalesce(sum(length(r.search_vector)), 0)
    FROM {rows} AS r GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (source_id, generation) DO UPDATE
        SET chunks = retrieval_lexical_source.chunks + excluded.chunks,
            total_dl = retrieval_lexical_source.total_dl + excluded.total_dl;
    DELETE FROM retrieval_lexical_source WHERE chunks <= 0;
"""


# Rows whose indexed parts changed: anything else (an embedding, metadata) leaves the index alone.
_CHANGED = """(SELECT {side}.* FROM old_rows AS o JOIN new_rows AS n ON n.id = o.id
    WHERE o.source_id <> n.source_id OR o.generation <> n.generation OR o.search_vector <> n.search_vector)"""

TRIGGERS = f"""
CREATE FUNCTION retrieval_lexical_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN {_add("new_rows")} RETURN NULL;
END $$;
CREATE FUNCTION retrieval_lexical_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN {_remove("old_rows")} RETURN NULL;
END $$;
CREATE FUNCTION retrieval_lexical_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN {_remove(_CHANGED.format(side="o"))} {_add(_CHANGED.format(side="n"))} RETURN NULL;
END $$;
CREATE TRIGGER retrieval_lexical_insert AFTER INSERT ON sources_chunk
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION retrieval_lexical_insert();
CREATE TRIGGER retrieval_lexical_delete AFTER DELETE ON sources_chunk
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION retrieval_lexical_delete();
CREATE TRIGGER retrieval_lexical_update AFTER UPDATE ON sources_chunk
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION retrieval_lexical_update();
"""

# Chunks indexed before this migration.
BACKFILL = (
    _add("sources_chunk") + "ANALYZE retrieval_posting; ANALYZE retrieval_term; ANALYZE retrieval_lexical_source;"
)

DROP_TRIGGERS = """
DROP TRIGGER IF EXISTS retrieval_lexical_insert ON sources_chunk;
DROP TRIGGER IF EXISTS retrieval_lexical_delete ON sources_chunk;
DROP TRIGGER IF EXISTS retrieval_lexical_update ON sources_chunk;
DROP FUNCTION IF EXISTS retrieval_lexical_insert();
DROP FUNCTION IF EXISTS retrieval_lexical_delete();
DROP FUNCTION IF EXISTS retrieval_lexical_update();
"""
