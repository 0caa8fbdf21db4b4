"""The lexical channel: BM25 computed in SQL over the full-text candidates.

PostgreSQL's ``ts_rank`` has no inverse document frequency: a query's
commonest word counts as much as its rarest. BM25 here is Okapi BM25 over
the GIN-filtered candidates (chunks matching any query lexeme, inside the
scope), with term frequencies read from the stored weighted tsvector:
an occurrence in the symbol or path (A) counts 4 times, in a heading (B)
twice, in the body (C) once. Measured with ``rag_eval`` (README, "Retrieval
quality"); ``RAG_LEXICAL_RANKING=ts_rank`` keeps the old ranking for comparison.
"""

import re

from django.conf import settings
from django.db import connection

from retrieval.channels import Candidate, Scope
from retrieval.choices import LexicalRanking
from sources.models import IDENTIFIER_CAMEL, IDENTIFIER_SEPARATORS

# Robertson's textbook constants; k1=0.9, b=0.4 (Anserini's MS MARCO values)
# measured 0.740 against 0.737 on msmarco-5k but lost 0.045 hit@5 on click.
BM25_K1 = 1.2
BM25_B = 0.75
# A heavier symbol/path weight than 2x measured +0.025 lexical hit@5 on
# click and no change on msmarco-5k.
FIELD_WEIGHTS = {"A": 4.0, "B": 2.0, "C": 1.0}


# The query's lexemes: those of the text as typed (they match whole
# identifiers in symbols) and of its identifier words, split the way the
# stored vector splits them (sources.models), OR-ed together. Matching any
# word, not all (websearch_to_tsquery ANDs them), is what lets a
# natural-language question find anything; the ranking rewards matching more.
_QUERY_LEXEMES = f"""
    SELECT DISTINCT lexeme FROM unnest(tsvector_to_array(
        to_tsvector('english', %(query)s)
        || to_tsvector('english', translate(regexp_replace(%(query)s, '{IDENTIFIER_CAMEL[0]}', E'{IDENTIFIER_CAMEL[1].replace(chr(92), chr(92) * 2)}', 'g'),
                                            '{IDENTIFIER_SEPARATORS}', '{" " * len(IDENTIFIER_SEPARATORS)}'))
    )) AS lexeme
"""


# "quoted phrases" and -excluded words are web search syntax: such a query
# must also satisfy websearch_to_tsquery (phrase, AND, NOT); the ranking
# stays BM25 over all its words.
_OPERATORS = re.compile(r'"[^"]+"|(?:^|\s)-\w')


def lexical_candidates(*, query: str, scope: Scope, limit: int, ranking: LexicalRanking | None = None) -> list[Candidate]:
    """The best ``limit`` chunks for the query's words, inside the scope.

    Any word may match; "quoted phrases" and -exclusions are honoured.

    A query with no indexable word (only stop words or punctuation, such as
    "->" or "to be or not to be") falls back to a case-insensitive substring
    match on the chunk text, ranked by the number of occurrences.
    """
    ranking = ranking or settings.RAG_LEXICAL_RANKING
    # The cost grows with the words (each OR-ed word widens the candidates):
    # past RAG_LEXICAL_MAX_WORDS the rest of a long query is left to the vector channel.
    query = " ".join(query.split()[: settings.RAG_LEXICAL_MAX_WORDS])
    where, params = scope.sql_named()
    params.update(query=query, limit=limit, operators=bool(_OPERATORS.search(query)), a=FIELD_WEIGHTS["A"], b=FIELD_WEIGHTS["B"], c=FIELD_WEIGHTS["C"])
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM ({_QUERY_LEXEMES}) AS words", params)
        sql = _SUBSTRING if cursor.fetchone()[0] == 0 else _BM25 if ranking == LexicalRanking.BM25 else _TS_RANK
        cursor.execute(sql.format(lexemes=_QUERY_LEXEMES, where=where, k1=BM25_K1, b=BM25_B), params)
        rows = cursor.fetchall()
    return [Candidate(chunk_id=row[0], rank=rank, score=float(row[1])) for rank, row in enumerate(rows, start=1)]


_CANDIDATES = """
    q AS (
        SELECT array_agg(lexeme) AS terms, string_agg(quote_literal(lexeme), ' | ')::tsquery AS query
        FROM ({lexemes}) AS words
    ),
    cand AS MATERIALIZED (
        SELECT c.id, c.search_vector AS sv, length(c.search_vector) AS dl
        FROM sources_chunk c JOIN sources_source s ON s.id = c.source_id, q
        WHERE c.search_vector @@ q.query AND {where}
          AND (NOT %(operators)s OR c.search_vector @@ websearch_to_tsquery('english', %(query)s))
    )
"""

# N is the table's row count as the planner estimates it: the last ANALYZE's
# rows per page times the pages now (an exact per-scope count would cost a
# scan per query). A table never analyzed since it filled (reltuples -1 or
# no pages then) is counted; without that, N fell to the candidate count and
# IDF nearly vanished (click hit@5 0.583 instead of 0.658). Document frequency
# and average length come from the candidates. Length is the number of
# distinct lexemes, which the tsvector stores.
_BM25 = "WITH" + _CANDIDATES + """,
    tf AS (
        SELECT cand.id, cand.dl, u.lexeme,
               (SELECT sum(CASE w WHEN 'A' THEN %(a)s WHEN 'B' THEN %(b)s WHEN 'C' THEN %(c)s ELSE 1.0 END)
                FROM unnest(u.weights) AS w) AS tf
        FROM cand, q, unnest(cand.sv) AS u
        WHERE u.lexeme = ANY(q.terms)
    ),
    df AS (SELECT lexeme, count(*) AS df FROM tf GROUP BY lexeme),
    stats AS (
        SELECT greatest(
                   (SELECT CASE WHEN reltuples > 0 AND relpages > 0
                                THEN reltuples / relpages
                                     * (pg_relation_size(oid) / current_setting('block_size')::int)
                                ELSE (SELECT count(*) FROM sources_chunk) END
                    FROM pg_class WHERE oid = 'sources_chunk'::regclass),
                   (SELECT count(*) FROM cand))::float8 AS n,
               (SELECT avg(dl) FROM cand)::float8 AS avgdl
    )
    SELECT tf.id, sum(
        ln(1 + (stats.n - df.df + 0.5) / (df.df + 0.5))
        * tf.tf * ({k1} + 1) / (tf.tf + {k1} * (1 - {b} + {b} * tf.dl / stats.avgdl))
    ) AS score
    FROM tf JOIN df USING (lexeme), stats
    GROUP BY tf.id
    ORDER BY score DESC, tf.id
    LIMIT %(limit)s
"""

_TS_RANK = "WITH" + _CANDIDATES + """
    SELECT cand.id, ts_rank(cand.sv, q.query, 1) AS score
    FROM cand, q
    ORDER BY score DESC, cand.id
    LIMIT %(limit)s
"""

_SUBSTRING = """
    SELECT c.id, (length(c.content) - length(replace(lower(c.content), lower(%(query)s), ''))) / length(%(query)s) AS score
    FROM sources_chunk c JOIN sources_source s ON s.id = c.source_id
    WHERE strpos(lower(c.content), lower(%(query)s)) > 0 AND {where}
    ORDER BY score DESC, c.id
    LIMIT %(limit)s
"""
