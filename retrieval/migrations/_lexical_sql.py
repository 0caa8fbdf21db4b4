"""SQL of migrations 0002 and 0005: triggers that keep the lexical index (retrieval/models/lexical.py) in step with
sources_chunk.

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


def _lexical_sources_remove(rows: str) -> str:
    """The per-source counts (chunks, total length) of the removed ``rows`` taken back, emptied sources dropped."""
    return f"""    INSERT INTO retrieval_lexical_source (source_id, generation, chunks, total_dl)
    SELECT r.source_id, r.generation, -count(*), -coalesce(sum(length(r.search_vector)), 0)
    FROM {rows} AS r GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (source_id, generation) DO UPDATE
        SET chunks = retrieval_lexical_source.chunks + excluded.chunks,
            total_dl = retrieval_lexical_source.total_dl + excluded.total_dl;
    DELETE FROM retrieval_lexical_source WHERE chunks <= 0;
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
{_lexical_sources_remove(rows)}"""


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


# Migration 0005: deleting chunks no longer joins the posting table with the deleted rows' words as 0002 did. There
# the planner merge-joined the postings with the rows on (source_id, generation) alone, every posting of a source
# against every deleted chunk of it: deleting a root of 2,000 chunks took 77 s, 13,000 more than 120 s. Now a source
# generation left without chunks loses its postings by the primary key's prefix, planned with its real size (one
# statement per generation: a root's few segments); the postings of the other deleted chunks are found by their whole
# key, materialized first. Emptiness is checked in the statement that deletes, so a chunk another transaction commits
# meanwhile keeps its postings. Document frequencies and lengths are subtracted exactly as before: a concurrent
# writer's increments of the same rows survive.
_REMOVE_POSTINGS = """
    emptied_sources := '{{}}'; emptied_generations := '{{}}';
    FOR pair IN SELECT DISTINCT r.source_id, r.generation FROM {rows} AS r LOOP
        EXECUTE 'WITH empty AS (SELECT NOT EXISTS (SELECT FROM sources_chunk WHERE source_id = $1 AND generation = $2)
                     AS yes),
                 gone AS (DELETE FROM retrieval_posting WHERE source_id = $1 AND generation = $2
                          AND (SELECT yes FROM empty))
                 SELECT yes FROM empty'
            INTO emptied USING pair.source_id, pair.generation;
        IF emptied THEN
            emptied_sources := emptied_sources || pair.source_id;
            emptied_generations := emptied_generations || pair.generation;
        ELSE
            kept := kept + 1;
        END IF;
    END LOOP;
    IF kept > 0 THEN  -- else skipped: the join would walk the emptied generations' dead index entries for nothing
    WITH k AS MATERIALIZED (
        SELECT r.source_id, r.generation, u.lexeme, r.id AS chunk_id
        FROM {rows} AS r, unnest(tsvector_to_array(r.search_vector)) AS u(lexeme)
        WHERE NOT EXISTS (SELECT FROM unnest(emptied_sources, emptied_generations) AS e(source_id, generation)
                          WHERE e.source_id = r.source_id AND e.generation = r.generation))
    DELETE FROM retrieval_posting AS p USING k
    WHERE p.source_id = k.source_id AND p.generation = k.generation AND p.lexeme = k.lexeme AND p.chunk_id = k.chunk_id;
    END IF;
"""
_REMOVE_STATISTICS = """
    WITH changed AS (
        INSERT INTO retrieval_term (lexeme, source_id, generation, df)
        SELECT u.lexeme, r.source_id, r.generation, -count(*)
        FROM {rows} AS r, unnest(tsvector_to_array(r.search_vector)) AS u(lexeme)
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (lexeme, source_id, generation) DO UPDATE SET df = retrieval_term.df + excluded.df
        RETURNING lexeme, source_id, generation, df)
    SELECT coalesce(array_agg(lexeme), '{{}}'), coalesce(array_agg(source_id), '{{}}'),
           coalesce(array_agg(generation), '{{}}')
    INTO zero_lexemes, zero_sources, zero_generations FROM changed WHERE df <= 0;
    DELETE FROM retrieval_term AS t
    USING unnest(zero_lexemes, zero_sources, zero_generations) AS z(lexeme, source_id, generation)
    WHERE t.lexeme = z.lexeme AND t.source_id = z.source_id AND t.generation = z.generation AND t.df <= 0;
"""
_DECLARE = """DECLARE pair record; emptied boolean; kept integer := 0;
    emptied_sources bigint[]; emptied_generations integer[]; zero_lexemes text[]; zero_sources bigint[];
    zero_generations integer[];"""


def _remove_emptied_first(rows: str) -> str:
    return _REMOVE_POSTINGS.format(rows=rows) + _REMOVE_STATISTICS.format(rows=rows) + _lexical_sources_remove(rows)


def _removing_functions(remove, declare: str = "") -> str:
    """The delete and update trigger functions, with ``remove`` as the statements that take chunks out."""
    return f"""
CREATE OR REPLACE FUNCTION retrieval_lexical_delete() RETURNS trigger LANGUAGE plpgsql AS $$
{declare} BEGIN {remove("old_rows")} RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION retrieval_lexical_update() RETURNS trigger LANGUAGE plpgsql AS $$
{declare} BEGIN {remove(_CHANGED.format(side="o"))} {_add(_CHANGED.format(side="n"))} RETURN NULL;
END $$;
"""


REMOVE_EMPTIED_FIRST = _removing_functions(_remove_emptied_first, _DECLARE)
REMOVE_EMPTIED_FIRST_UNDONE = _removing_functions(_remove)  # 0002's functions again
