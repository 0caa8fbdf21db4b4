"""The lexical channel: Okapi BM25 over impact-ordered postings, in SQL.

PostgreSQL's ``ts_rank`` has no inverse document frequency: a query's
commonest word counts as much as its rarest. This channel scores Okapi BM25
with term frequencies from the stored weighted tsvector (an occurrence in
the symbol or path (A) counts 4 times, in a heading (B) twice, in the body
(C) once), and N, each word's document frequency and the average length over the
chunks the caller may see (``idf_of``): another caller's sources move no
score.

Cost: each query word's postings (retrieval/models/lexical.py) are read
best first, rare words first and in full, common words to a bounded depth
(``RAG_LEXICAL_POSTINGS`` rows in all, the first read). The best candidates
are then scored exactly: the words a candidate was not read for are looked
up by key. The last impact read of a word bounds what any chunk not yet
read can get from it (``impact_bound``), so when the k-th exact score
reaches the sum of those bounds, no unread chunk can enter the top k and
the answer is exhaustive BM25's. Otherwise one deeper read in the same
statement (Fagin's threshold algorithm with MaxScore's split): that k-th
score is shared among the words, each list is read down to the impact
whose bound is its word's share (the words with the smallest whole-list
bounds not at all), at most ``RAG_LEXICAL_READ_CEILING`` times its first
depth, and every chunk found that could still reach the k-th score is
scored exactly (measured by ``rag_bench search`` as top-10 agreement with
exhaustive BM25).

``RAG_LEXICAL_RANKING=ts_rank`` keeps the old exhaustive ``ts_rank`` for
comparison. A query with no indexable word falls back to a bounded
substring match.
"""

import math
import re
from dataclasses import dataclass

from access.scope import Scope
from kernel.replicas import read_connection
from retrieval.candidates import Candidate
from retrieval.choices import LexicalRanking
from retrieval.config import LexicalConfig
from retrieval.models import LexicalPosting, LexicalSourceStats, LexicalTerm
from sources.models import IDENTIFIER_CAMEL, IDENTIFIER_SEPARATORS, Chunk, Source

# Robertson's textbook constants; k1=0.9, b=0.4 (Anserini's MS MARCO values)
# measured 0.740 against 0.737 on msmarco-5k but lost 0.045 hit@5 on click.
# The index's triggers hold copies of these (retrieval/migrations/_lexical_sql.py).
BM25_K1 = 1.2
BM25_B = 0.75
# A heavier symbol/path weight than 2x measured +0.025 lexical hit@5 on
# click and no change on msmarco-5k.
FIELD_WEIGHTS = {"A": 4.0, "B": 2.0, "C": 1.0}
# The impact's stand-in for the average length (distinct lexemes per chunk:
# 38 in the 100k bench corpus). It only orders a word's postings; scores use
# the true average.
REFERENCE_LENGTH = 40.0
# Reading a word's postings source by source costs one index probe per
# visible source; about this many postings read in impact order cost the same.
PROBE_COST = 4
# Candidates scored exactly: up to RESCORE_FACTOR per result asked for (room
# for a chunk that ranked low on partial scores to climb into the results),
# as far as RESCORE_PROBES key look-ups allow, never fewer than asked for.
# On the 100k bench corpus, 1x/2x/4x gave top-10 agreement 0.972/0.981/0.995
# for questions, names and common words at RAG_LEXICAL_POSTINGS=8000.
RESCORE_FACTOR = 4
RESCORE_PROBES = 1000
# Words scored per query, the rarest kept (RAG_LEXICAL_MAX_WORDS words seldom make more).
MAX_TERMS = 63


# The query's lexemes: those of the text as typed (they match whole
# identifiers in symbols) and of its identifier words, split the way the
# stored vector splits them (sources.models), OR-ed together. Matching any
# word, not all (websearch_to_tsquery ANDs them), is what lets a
# natural-language question find anything; the ranking rewards matching more.
QUERY_LEXEMES = """
    SELECT DISTINCT lexeme FROM unnest(tsvector_to_array(
        to_tsvector('english', %(query)s)
        || to_tsvector('english', translate(
               regexp_replace(%(query)s, %(identifier_camel)s, %(identifier_camel_to)s, 'g'),
               %(identifier_separators)s, %(identifier_spaces)s))
    )) AS lexeme
"""


def lexeme_params(query: str) -> dict:
    """``QUERY_LEXEMES``'s parameters: the query and the identifier pattern the stored vectors were split with."""
    return {
        "query": query,
        "identifier_camel": IDENTIFIER_CAMEL[0],
        "identifier_camel_to": IDENTIFIER_CAMEL[1],
        "identifier_separators": IDENTIFIER_SEPARATORS,
        "identifier_spaces": " " * len(IDENTIFIER_SEPARATORS),
    }


# The tables the SQL below reads, by the names their models give them.
TABLES = {
    "chunk": Chunk._meta.db_table,
    "source": Source._meta.db_table,
    "posting": LexicalPosting._meta.db_table,
    "term": LexicalTerm._meta.db_table,
    "lexical_source": LexicalSourceStats._meta.db_table,
}


# "quoted phrases" and -excluded words are web search syntax: such a query
# must also satisfy websearch_to_tsquery (phrase, AND, NOT); the ranking
# stays BM25 over all its words.
_OPERATORS = re.compile(r'"[^"]+"|(?:^|\s)-\w')

_VISIBLE = "SELECT s.id, s.active_generation AS generation FROM {source} s WHERE {where}"


@dataclass(frozen=True, slots=True)
class Term:
    lexeme: str
    df: int  # chunks in scope holding it
    # Chunks anywhere holding it: it prices reading the word's list best
    # first (read_plan), never a score.
    df_all: int


@dataclass(frozen=True, slots=True)
class Collection:
    """The caller's visible collection: its size (BM25's N), average length and the query's words in it."""

    sources: int
    chunks: int
    total_length: int
    terms: tuple[Term, ...]
    words: int  # the query's lexemes, found in scope or not
    # The visible sources and their active generations, in pairs.
    source_ids: tuple[int, ...] = ()
    generations: tuple[int, ...] = ()

    @property
    def average_length(self) -> float:
        return self.total_length / self.chunks if self.chunks else 0.0


@dataclass(frozen=True, slots=True)
class TermRead:
    """How one word's postings are read: ``depth`` of them best first, or all of them source by source."""

    term: Term
    depth: int
    by_source: bool

    @property
    def complete(self) -> bool:
        return self.by_source or self.depth >= self.term.df


def lexical_query(query: str, *, config: LexicalConfig) -> str:
    """The words the channel reads: each adds a list to read, so past ``max_words`` the rest of a long query is
    left to the vector channel."""
    return " ".join(query.split()[: config.max_words])


def lexical_candidates(
    *,
    query: str,
    scope: Scope,
    limit: int,
    ranking: LexicalRanking | None = None,
    warnings: list[str] | None = None,
    config: LexicalConfig | None = None,
    collection: Collection | None = None,
) -> list[Candidate]:
    """The best ``limit`` chunks for the query's words, inside the scope.

    Any word may match; "quoted phrases" and -exclusions are honoured.

    A query with no indexable word (only stop words or punctuation, such as
    "->" or "to be or not to be") falls back to a case-insensitive substring
    match on the newest RAG_LEXICAL_SUBSTRING_SCAN chunks in scope, ranked by
    the number of occurrences (a note in ``warnings`` says when more exist).

    ``collection``: ``collection_statistics`` of ``lexical_query(query)``
    when the caller read them already (the search does, in its first round trip).
    """
    config = config or LexicalConfig.from_settings()
    ranking = ranking or config.ranking
    query = lexical_query(query, config=config)
    collection = collection or collection_statistics(query=query, scope=scope)
    if collection.words == 0:
        return _substring(
            query=query, scope=scope, limit=limit, collection=collection, warnings=warnings, scan=config.substring_scan
        )
    if ranking == LexicalRanking.TS_RANK:
        return _ts_rank(query=query, scope=scope, limit=limit)
    if not collection.terms or not collection.chunks:
        return []
    reads = read_plan(collection, limit=limit, budget=config.postings)
    return _bm25(query=query, limit=limit, collection=collection, reads=reads, ceiling=config.read_ceiling)


_COLLECTION = """
    WITH vis AS MATERIALIZED ({visible}),
    coll AS (
        SELECT count(*) AS sources, coalesce(sum(l.chunks), 0) AS chunks, coalesce(sum(l.total_dl), 0) AS total
        FROM vis LEFT JOIN {lexical_source} l ON l.source_id = vis.id AND l.generation = vis.generation
    )
    SELECT coll.sources, coll.chunks, coll.total,
           (SELECT array_agg(id ORDER BY id) FROM vis), (SELECT array_agg(generation ORDER BY id) FROM vis), w.lexeme,
           (SELECT coalesce(sum(t.df), 0) FROM {term} t
            JOIN vis ON t.source_id = vis.id AND t.generation = vis.generation
            WHERE t.lexeme = w.lexeme),
           (SELECT coalesce(sum(t.df), 0) FROM {term} t WHERE t.lexeme = w.lexeme)
    FROM coll LEFT JOIN ({lexemes}) AS w ON TRUE
"""


def collection_statistics(*, query: str, scope: Scope) -> Collection:
    """One round trip: the visible collection's size and length, and each query word's document frequencies."""
    sql, params = collection_sql(query=query, scope=scope)
    with read_connection().cursor() as cursor:
        cursor.execute(sql, params)
        return collection_read(cursor.fetchall())


# The columns of collection_sql's rows, which collection_read reads.
COLLECTION_COLUMNS = 8


def collection_sql(*, query: str, scope: Scope) -> tuple[str, dict]:
    """``collection_statistics``' query, to run on its own or inside a larger one."""
    where, params = scope.source_sql()
    visible = _VISIBLE.format(where=where, **TABLES)
    return _COLLECTION.format(visible=visible, lexemes=QUERY_LEXEMES, **TABLES), {**params, **lexeme_params(query)}


def collection_read(rows: list[tuple]) -> Collection:
    """A Collection from ``collection_sql``'s rows (there is always one)."""
    sources, chunks, total, source_ids, generations = rows[0][:5]
    words = [row for row in rows if row[5] is not None]
    terms = tuple(Term(lexeme=row[5], df=int(row[6]), df_all=int(row[7])) for row in words if row[6] > 0)
    return Collection(
        sources=int(sources),
        chunks=int(chunks),
        total_length=int(total),
        terms=terms,
        words=len(words),
        source_ids=tuple(source_ids or ()),
        generations=tuple(generations or ()),
    )


def read_plan(collection: Collection, *, limit: int, budget: int) -> list[TermRead]:
    """How deep to read each word: rare words first and in full, then the budget shared among the rest.

    Every word reads at least ``limit`` postings, so each can bring its own
    best chunks. A word read best first through the impact index passes over
    other callers' postings on the way (``df_all / df`` of them per visible
    one); when reading every visible posting source by source is cheaper,
    that is done instead, and it is complete.
    """
    reads = []
    remaining = budget
    # The rarest MAX_TERMS: which lists a chunk was found in is a 64-bit set.
    terms = sorted(collection.terms, key=lambda t: (t.df, t.lexeme))[:MAX_TERMS]
    for number, term in enumerate(terms):
        share = max(limit, remaining // (len(terms) - number))
        depth = min(term.df, share)
        remaining = max(0, remaining - depth)
        impact_cost = min(term.df_all, depth * term.df_all / term.df)
        by_source = collection.sources * PROBE_COST + term.df < impact_cost
        reads.append(TermRead(term=term, depth=term.df if by_source else depth, by_source=by_source))
    return reads


def _bm25(*, query: str, limit: int, collection: Collection, reads: list[TermRead], ceiling: int) -> list[Candidate]:
    idf = [idf_of(collection, read.term) for read in reads]
    incomplete = sum(not read.complete for read in reads)
    params = {
        "source_ids": list(collection.source_ids),
        "generations": list(collection.generations),
        "query": query,
        "words": [read.term.lexeme for read in reads],
        "idf": idf,
        "by_source": [read.by_source for read in reads],
        "depths": [read.depth for read in reads],
        "dfs": [read.term.df for read in reads],
        "avgdl": collection.average_length,
        "rmin": min(1.0, REFERENCE_LENGTH / collection.average_length),
        "rescore": _rescored(limit, incomplete),
        "limit": limit,
        "exact": min(limit, EXACT_TOP),
        "k1": BM25_K1,
        "b": BM25_B,
        "deep_read": sum(read.depth for read in reads) * (ceiling - 1),
        "deep_rescore": DEEP_RESCORE,
        "non_essential": NON_ESSENTIAL_SHARE,
        "whole": WHOLE_LIST_SHARE,
        "tolerance": 1 + 1e-9,
    }
    sql = _BM25.format(
        **TABLES,
        operators=_OPERATOR_FILTER.format(**TABLES) if _OPERATORS.search(query) else "",
        score=_TERM_SCORE.format(tf="h.tf", dl="h.dl", term="h.term"),
        missing_score=_TERM_SCORE.format(tf="p.tf", dl="p.dl", term="x.term"),
        bound_last=_IMPACT_BOUND.format(impact="coalesce(t.last, %(k1)s::float8 + 1)"),
        bound_top=_IMPACT_BOUND.format(impact="coalesce(t.top, %(k1)s::float8 + 1)"),
        bound_cutoff=_IMPACT_BOUND.format(impact="r.cutoffs[t.term]"),
        cutoff=_IMPACT_CUTOFF.format(share="h.per_word", term="s.term"),
    )
    return _candidates(sql, params)


def impact_bound(impact: float, *, average_length: float) -> float:
    """The most a posting of this ``impact`` (or less) can add to a score, per unit of IDF, at this average length.

    The impact is BM25's term-frequency part at ``REFERENCE_LENGTH``; at the
    true average length the same posting scores
    (k1+1)·u / (u + r·(1-u)), u = impact/(k1+1), where r is the ratio of the
    two length normalisations. That rises with u, and r is at least
    min(1, REFERENCE_LENGTH / average_length) for any length, hence the bound.
    ``_IMPACT_BOUND`` is its SQL.
    """
    u = impact / (BM25_K1 + 1)
    r = min(1.0, REFERENCE_LENGTH / average_length)
    return (BM25_K1 + 1) * u / (u + r * (1 - u)) * (1 + BOUND_SLACK)


def _candidates(sql: str, params: dict) -> list[Candidate]:
    """Rows of (chunk id, score, source id, path, symbol, language, vector pending), best first."""
    with read_connection().cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [
        Candidate(
            chunk_id=chunk_id,
            rank=rank,
            score=float(score),
            source_id=source_id,
            path=path,
            symbol=symbol,
            language=language,
            pending=pending,
        )
        for rank, (chunk_id, score, source_id, path, symbol, language, pending) in enumerate(rows, start=1)
    ]


def _rescored(limit: int, incomplete: int) -> int:
    if not incomplete:  # every list read in full: the partial scores are the exact ones
        return limit
    return max(limit, min(limit * RESCORE_FACTOR, RESCORE_PROBES // incomplete))


def idf_of(collection: Collection, term: Term) -> float:
    """BM25's IDF, with N and the document frequency both counted over the chunks the caller may see.

    Nothing of other callers' sources enters a score, so a score cannot
    tell how much they hold or when they change (issue 22, finding 7: with
    the whole index's N, a bot's scores rose while another bot's root
    indexed). The whole index's N had measured better on the code sets only
    because msmarco-5k, kept in the same database by `make eval`, swelled it
    (a larger N lifts every word's IDF alike, which favours chunks matching
    more of the query's words). With msmarco-5k beside them, lexical hit@5 /
    MRR@10 went from 0.658 / 0.459 to 0.648 / 0.437 on click and from
    0.640 / 0.484 to 0.607 / 0.470 on jinja2, but fused (the default) from
    0.739 / 0.572 to 0.744 / 0.577 and from 0.768 / 0.591 to 0.775 / 0.592;
    msmarco-5k, alone in its scope, measured the same to the last digit.
    """
    n = collection.chunks
    return math.log(1 + (n - term.df + 0.5) / (term.df + 0.5))


# float8 throughout: a bare 0.75 is numeric in PostgreSQL, and numeric arithmetic per posting cost a third of the query.
_TERM_SCORE = (
    "(%(idf)s::float8[])[{term}] * {tf} * (%(k1)s::float8 + 1)"
    " / ({tf} + %(k1)s::float8 * (1 - %(b)s::float8 + %(b)s::float8 * {dl} / %(avgdl)s::float8))"
)


# Phrases and exclusions: checked on the candidates' stored vectors.
_OPERATOR_FILTER = """JOIN {chunk} c ON c.id = scored.chunk_id
    AND c.search_vector @@ websearch_to_tsquery('english', %(query)s)"""

# The impact is stored as a 4-byte float: the bound gives it that much room.
BOUND_SLACK = 1e-6
_IMPACT_BOUND = (
    "(%(k1)s::float8 + 1) * ({impact} / (%(k1)s::float8 + 1))"
    " / ({impact} / (%(k1)s::float8 + 1) + %(rmin)s::float8 * (1 - {impact} / (%(k1)s::float8 + 1)))"
    " * (1 + " + repr(BOUND_SLACK) + ")"
)

# _IMPACT_BOUND solved for the impact: the lowest impact whose bound, times
# the word's IDF, is {share}; NULL when even the best posting's bound is
# below it (the word need not be read).
_IMPACT_CUTOFF = (
    "CASE WHEN {y} >= 1 THEN NULL ELSE (%(k1)s::float8 + 1) * {y} * %(rmin)s::float8"
    " / (1 - {y} + {y} * %(rmin)s::float8) END"
).replace(
    "{y}",
    "({share} / (%(idf)s::float8[])[{term}] / (1 + " + repr(BOUND_SLACK) + ") / (%(k1)s::float8 + 1))",
)

# The deep read stops once the first EXACT_TOP results are provably
# exhaustive BM25's (the results after them are the best of what was read,
# with exact scores). The 10th best score is well above the 50th, so the
# cut-offs sit higher: on the 100k bench corpus, questions p50 147 against
# 274 ms of SQL at load 20, both with top-10 agreement 1.0.
EXACT_TOP = 10

# MaxScore's split: the words whose whole lists' bounds sum to at most this
# share of the first read's 10th score are not read deeper, only looked up
# by key for the candidates; the rest of the score is shared evenly among
# the other words' cut-offs.
NON_ESSENTIAL_SHARE = 0.5

# A word whose share of the score is below this part of its best posting's
# bound would be read down to where most of its list lies: it is read
# whole, so no candidate needs a look-up for it.
WHOLE_LIST_SHARE = 0.5

# Candidates of the deep read scored exactly: every one whose upper bound
# reaches the first read's 10th score, up to this many (past it the top
# 10 may be inexact; the bench counts how often, as agreement).
DEEP_RESCORE = 20000

# Two passes in one recursive statement (the plan is the same for every
# query: no round trips, no re-planning). Pass 0 reads each word's postings
# best first to its depth (the scope checked per row by two hashed array
# tests, which keep the index's order; a posting of a visible source's
# other generation is dropped by the join with vis after the limit), or
# every visible posting source by source (complete). t: per word, whether
# its list is finished and the bound of what any unread posting adds (ub).
# scored: the partial BM25 of every chunk found and its upper bound (the
# partial score plus the bounds of the words it was not found for); the
# best `rescore` by upper bound are scored exactly (the words not read for
# them looked up by key). Pass 0 is done when its k-th exact score (theta)
# is at least both the bound of a chunk found in no list and the upper
# bound of every chunk not rescored. Otherwise pass 1 (Fagin's threshold
# algorithm with MaxScore's split, in one step instead of rounds): a chunk
# that can reach theta must get more than theta's share from some word, so
# the words with the smallest whole-list bounds (summing to at most
# NON_ESSENTIAL_SHARE of theta) are not read, and every other word is read
# down to the impact whose bound is its even share of the rest of theta
# (`cutoffs`; an index range, no LIMIT to guess), at most
# RAG_LEXICAL_READ_CEILING times its first depth. The bounds of pass 1 sum
# to at most theta, so a chunk found in no list cannot enter the top k;
# every chunk found whose upper bound reaches theta is scored exactly.
_BM25 = """
    WITH RECURSIVE vis AS (SELECT * FROM unnest(%(source_ids)s::bigint[], %(generations)s::int[]) AS v(id, generation)),
    words AS MATERIALIZED (
        SELECT w.lexeme, w.by_source, w.term::int AS term
        FROM unnest(%(words)s::text[], %(by_source)s::bool[]) WITH ORDINALITY AS w(lexeme, by_source, term)
    ),
    rounds AS (
        SELECT 0 AS round, NULL::float8[] AS cutoffs, NULL::float8[] AS tops, 0::float8 AS theta,
               false AS done, NULL::bigint[] AS ids, NULL::float8[] AS scores
        UNION ALL
        SELECT r.round + 1, x.cutoffs, x.tops, x.theta, x.done, x.ids, x.scores
        FROM rounds r CROSS JOIN LATERAL (
            WITH hits AS MATERIALIZED (
                SELECT w.term, p.chunk_id, p.source_id, p.generation, p.tf, p.dl, p.impact
                FROM words w CROSS JOIN LATERAL (
                    (SELECT p.chunk_id, p.source_id, p.generation, p.tf, p.dl, p.impact FROM {posting} p
                     WHERE r.cutoffs IS NULL AND NOT w.by_source AND p.lexeme = w.lexeme
                       AND p.source_id = ANY(%(source_ids)s::bigint[]) AND p.generation = ANY(%(generations)s::int[])
                     ORDER BY p.impact DESC LIMIT (%(depths)s::int[])[w.term])
                    UNION ALL
                    (SELECT p.chunk_id, p.source_id, p.generation, p.tf, p.dl, p.impact FROM {posting} p
                     WHERE NOT w.by_source AND p.lexeme = w.lexeme AND p.impact >= r.cutoffs[w.term]
                       AND p.source_id = ANY(%(source_ids)s::bigint[]) AND p.generation = ANY(%(generations)s::int[])
                     ORDER BY p.impact DESC LIMIT %(deep_read)s)
                    UNION ALL
                    (SELECT p.chunk_id, p.source_id, p.generation, p.tf, p.dl, p.impact
                     FROM vis JOIN {posting} p
                       ON p.source_id = vis.id AND p.generation = vis.generation AND p.lexeme = w.lexeme
                     WHERE w.by_source)
                ) AS p
            ),
            -- Counted per source generation first: the join with vis is then a few rows, not one per posting.
            per_source AS (
                SELECT h.term, h.source_id, h.generation, min(h.impact) AS last, max(h.impact) AS top, count(*) AS got
                FROM hits h GROUP BY h.term, h.source_id, h.generation
            ),
            t0 AS (
                SELECT w.term, min(h.last) AS last, max(h.top) AS top,
                       coalesce(sum(h.got), 0) >= %(deep_read)s AS capped,
                       w.by_source
                       OR coalesce(sum(h.got) FILTER (WHERE v.id IS NOT NULL), 0) >= (%(dfs)s::int[])[w.term]
                       OR coalesce(sum(h.got), 0) < CASE
                           WHEN r.cutoffs IS NULL THEN (%(depths)s::int[])[w.term]
                           WHEN r.cutoffs[w.term] < 0 THEN %(deep_read)s
                           ELSE 0 END AS complete
                FROM words w LEFT JOIN per_source h ON h.term = w.term
                LEFT JOIN vis v ON v.id = h.source_id AND v.generation = h.generation
                GROUP BY w.term, w.by_source
            ),
            t AS MATERIALIZED (
                SELECT t.term, t.complete,
                       CASE WHEN t.complete THEN 0
                            WHEN r.cutoffs IS NULL THEN (%(idf)s::float8[])[t.term] * {bound_last}
                            WHEN r.cutoffs[t.term] IS NULL THEN r.tops[t.term]
                            WHEN t.capped THEN (%(idf)s::float8[])[t.term] * {bound_last}
                            ELSE least(r.tops[t.term], (%(idf)s::float8[])[t.term] * {bound_cutoff}) END AS ub,
                       CASE WHEN t.complete THEN 0 ELSE (%(idf)s::float8[])[t.term] * {bound_top} END AS top_ub
                FROM t0 AS t
            ),
            bounds AS MATERIALIZED (
                SELECT sum(t.ub) AS total, array_agg(t.complete ORDER BY t.term) AS complete,
                       array_agg(t.ub ORDER BY t.term) AS ubs, array_agg(t.top_ub ORDER BY t.term) AS tops
                FROM t
            ),
            scored AS (
                SELECT h.chunk_id, min(h.source_id) AS source_id, min(h.generation) AS generation,
                       sum({score}) AS score, bit_or(1::bigint << (h.term - 1)) AS seen, sum(b.ubs[h.term]) AS seen_ub
                FROM hits h JOIN vis ON vis.id = h.source_id AND vis.generation = h.generation
                CROSS JOIN bounds b  -- an array look-up per hit: joined with t, the planner looped over t per hit
                GROUP BY h.chunk_id
            ),
            ranked AS MATERIALIZED (
                SELECT scored.*, scored.score + b.total - scored.seen_ub AS upper
                FROM scored CROSS JOIN bounds b {operators}
                ORDER BY upper DESC, scored.chunk_id
                LIMIT CASE WHEN r.cutoffs IS NULL THEN %(rescore)s + 1 ELSE %(deep_rescore)s END
            ),
            top AS (
                SELECT * FROM (
                    SELECT ranked.*, row_number() OVER (ORDER BY upper DESC, chunk_id) AS n FROM ranked
                ) AS ranked
                WHERE n <= %(rescore)s OR (r.cutoffs IS NOT NULL AND upper * %(tolerance)s >= r.theta)
            ),
            -- Summed by one aggregate, not joined: estimated at one row, the join of
            -- candidates and their missing scores ran as a nested loop (quadratic).
            parts AS (
                SELECT top.chunk_id, top.score FROM top
                UNION ALL
                SELECT top.chunk_id, {missing_score}
                FROM top CROSS JOIN bounds b CROSS JOIN LATERAL unnest(b.complete) WITH ORDINALITY AS x(complete, term)
                CROSS JOIN LATERAL (
                    SELECT p.tf, p.dl FROM {posting} p
                    WHERE p.source_id = top.source_id AND p.generation = top.generation
                      AND p.lexeme = (%(words)s::text[])[x.term] AND p.chunk_id = top.chunk_id
                    LIMIT 1  -- kept a probe by key per pair: flattened, the planner joined whole posting lists
                ) AS p
                WHERE NOT x.complete AND top.seen & (1::bigint << (x.term::int - 1)) = 0
            ),
            best AS (
                SELECT parts.chunk_id, sum(parts.score) AS score FROM parts
                GROUP BY parts.chunk_id
                ORDER BY score DESC, parts.chunk_id
                LIMIT %(limit)s
            ),
            found AS (
                SELECT array_agg(chunk_id ORDER BY score DESC, chunk_id) AS ids,
                       array_agg(score ORDER BY score DESC, chunk_id) AS scores,
                       coalesce((array_agg(score ORDER BY score DESC, chunk_id))[%(exact)s], 0) AS kth
                FROM best
            ),
            split AS (
                SELECT t.term, t.complete, t.top_ub,
                       NOT t.complete AND sum(t.top_ub) OVER (ORDER BY t.top_ub, t.term)
                                          <= f.kth * %(non_essential)s AS skipped
                FROM t CROSS JOIN found f
            ),
            share AS (
                SELECT (f.kth / %(tolerance)s - coalesce(sum(s.top_ub) FILTER (WHERE s.skipped), 0))
                       / greatest(1, count(*) FILTER (WHERE NOT s.skipped AND NOT s.complete)) AS per_word
                FROM split s CROSS JOIN found f GROUP BY f.kth
            ),
            plan AS (
                SELECT array_agg(CASE WHEN s.complete OR h.per_word <= 0 THEN -1::float8
                                      WHEN s.skipped THEN NULL
                                      WHEN h.per_word < s.top_ub * %(whole)s THEN -1::float8
                                      ELSE {cutoff} END ORDER BY s.term) AS cutoffs,
                       -- at most what the words read deeper hold in scope, known before reading
                       sum((%(dfs)s::int[])[s.term]) FILTER (WHERE NOT s.skipped) AS cost
                FROM split s CROSS JOIN share h
            )
            SELECT p.cutoffs, b.tops, f.kth AS theta,
                   r.cutoffs IS NOT NULL OR %(deep_read)s <= 0 OR coalesce(p.cost, 0) > %(deep_read)s
                   OR (b.total <= f.kth * %(tolerance)s
                       AND coalesce((SELECT upper FROM ranked OFFSET %(rescore)s), 0) <= f.kth * %(tolerance)s) AS done,
                   f.ids, f.scores
            FROM bounds b, found f, plan p
        ) AS x
        WHERE NOT r.done
    )
    SELECT best.chunk_id, best.score, c.source_id, c.path, c.symbol, c.language, c.vector_pending
    FROM rounds r CROSS JOIN LATERAL unnest(r.ids, r.scores) WITH ORDINALITY AS best(chunk_id, score, rank)
    JOIN {chunk} c ON c.id = best.chunk_id
    WHERE r.done
    ORDER BY best.rank
"""


def _ts_rank(*, query: str, scope: Scope, limit: int) -> list[Candidate]:
    """PostgreSQL's ts_rank over every chunk in scope with a query word (exhaustive; a comparison, not a default)."""
    where, params = scope.chunk_sql()
    params.update(lexeme_params(query), limit=limit, operators=bool(_OPERATORS.search(query)))
    return _candidates(_TS_RANK.format(lexemes=QUERY_LEXEMES, where=where, **TABLES), params)


_TS_RANK = """
    WITH q AS (
        SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery AS query FROM ({lexemes}) AS words
    )
    SELECT c.id, ts_rank(c.search_vector, q.query, 1) AS score, c.source_id, c.path, c.symbol, c.language,
           c.vector_pending
    FROM {chunk} c JOIN {source} s ON s.id = c.source_id, q
    WHERE c.search_vector @@ q.query AND {where}
      AND (NOT %(operators)s OR c.search_vector @@ websearch_to_tsquery('english', %(query)s))
    ORDER BY score DESC, c.id
    LIMIT %(limit)s
"""


def _substring(
    *,
    query: str,
    scope: Scope,
    limit: int,
    collection: Collection,
    warnings: list[str] | None,
    scan: int,
) -> list[Candidate]:
    """Chunks holding the text as typed, among the newest ``scan`` in scope (bounded, never a full scan)."""
    where, params = scope.chunk_sql()
    params.update(query=query, limit=limit, scan=scan)
    found = _candidates(_SUBSTRING.format(where=where, **TABLES), params)
    if collection.chunks > scan and warnings is not None:
        warnings.append(
            f"lexical: the query has no indexable word, so it was matched as text in the newest {scan:,} "
            f"of {collection.chunks:,} chunks (RAG_LEXICAL_SUBSTRING_SCAN)"
        )
    return found


_SUBSTRING = """
    SELECT id, (length(content) - length(replace(lower(content), lower(%(query)s), ''))) / length(%(query)s) AS score,
           source_id, path, symbol, language, vector_pending
    FROM (
        SELECT c.id, c.content, c.source_id, c.path, c.symbol, c.language, c.vector_pending
        FROM {chunk} c JOIN {source} s ON s.id = c.source_id
        WHERE {where} ORDER BY c.id DESC LIMIT %(scan)s
    ) AS newest
    WHERE strpos(lower(content), lower(%(query)s)) > 0
    ORDER BY score DESC, id
    LIMIT %(limit)s
"""
