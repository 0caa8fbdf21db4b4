"""The lexical channel's inverted index: postings in impact order, with the statistics BM25 needs.

The chunk table's weighted tsvector stays the source of truth. Triggers on
``sources_chunk`` (migration ``retrieval.0002``) keep these tables in step
in the same statement that inserts, updates or deletes chunks, whatever
wrote them (the ORM, COPY, a cascade), so a committed chunk is always
searchable and a deleted one never is. Nothing in Python writes them.

Why a table and not only the GIN index: GIN answers "which chunks hold this
word", all of them, unordered; BM25 then had to score every one (2 s for
"def __init__" at 100k chunks). Here each word's postings are read best
first, a bounded number of them (retrieval/lexical.py), so the cost of a
query depends on its words, not on the size of the corpus.

Statistics are kept per source and generation, so a search computes N, the
average length and each word's document frequency over exactly the chunks
its caller may see (textbook BM25 over the visible collection), by summing a
few rows per visible source.
"""

from django.db import models


class RealField(models.FloatField):
    """A 4-byte float: these tables hold one row per word per chunk, and 4 bytes a column count."""

    def db_type(self, connection) -> str:
        return "real"


class LexicalPosting(models.Model):
    """One word of one chunk: its weighted term frequency and the chunk's length.

    ``impact`` orders a word's postings best first: BM25's term-frequency
    part, tf (k1 + 1) / (tf + k1 (1 - b + b dl / REFERENCE_LENGTH)), with a
    fixed reference length so a row never needs rewriting; the exact score
    at query time uses the visible collection's true average length.
    """

    pk = models.CompositePrimaryKey("source_id", "generation", "lexeme", "chunk_id")
    source_id = models.BigIntegerField()
    generation = models.IntegerField()
    lexeme = models.TextField()
    chunk_id = models.BigIntegerField()
    tf = RealField()
    dl = models.IntegerField()
    impact = RealField()

    class Meta:
        db_table = "retrieval_posting"
        indexes = [
            # Read best first per word; the scope columns and everything the
            # score needs ride along, so the read never touches the table.
            models.Index(
                fields=["lexeme", "-impact"],
                include=["source_id", "generation", "chunk_id", "tf", "dl"],
                name="retrieval_posting_impact",
            ),
        ]


class LexicalTerm(models.Model):
    """How many chunks of one source generation hold a word (BM25's document frequency, summed over visible sources)."""

    pk = models.CompositePrimaryKey("lexeme", "source_id", "generation")
    lexeme = models.TextField()
    source_id = models.BigIntegerField()
    generation = models.IntegerField()
    df = models.IntegerField()

    class Meta:
        db_table = "retrieval_term"


class LexicalSourceStats(models.Model):
    """Chunk count and total length of one source generation (N and the average length, summed over visible sources)."""

    pk = models.CompositePrimaryKey("source_id", "generation")
    source_id = models.BigIntegerField()
    generation = models.IntegerField()
    chunks = models.BigIntegerField()
    total_dl = models.BigIntegerField()

    class Meta:
        db_table = "retrieval_lexical_source"
