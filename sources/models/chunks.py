"""The one chunk table every source indexes into, and the cache of contextual descriptions."""

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Func, Value
from pgvector.django import VectorField

from kernel.citations import citation_text
from sources.models.base import EmbeddingModel, Source

# Identifiers are indexed as the words people type: "ChunkSearch.run_query",
# "os.path.join" -> "Chunk Search run query", "os path join" (PostgreSQL's
# parser keeps dotted names whole). The lexical channel applies the same
# transform to the query (retrieval/lexical.py), so both sides agree.
IDENTIFIER_CAMEL = (r"([a-z0-9])([A-Z])", r"\1 \2")
IDENTIFIER_SEPARATORS = "._/-:"


# Where a chunk's contextual description (sources/contextual.py) is kept:
# the API and the page show it from there, and the lexical index reads it.
DESCRIPTION_KEY = "contextual_description"
# Where a git root's chunk keeps the commit it was read at (sources/git_roots.py): hits, /context and the viewer
# show it, and the root's permalink template is filled with it. In the row already loaded: no join on search.
COMMIT_KEY = "commit"


def _identifier_words(field: str | Func) -> Func:
    pattern, replacement = IDENTIFIER_CAMEL
    source = models.F(field) if isinstance(field, str) else field
    camel = Func(
        source,
        Value(pattern),
        Value(replacement),
        Value("g"),
        function="regexp_replace",
        output_field=models.TextField(),
    )
    return Func(
        camel,
        Value(IDENTIFIER_SEPARATORS),
        Value(" " * len(IDENTIFIER_SEPARATORS)),
        function="translate",
        output_field=models.TextField(),
    )


def _description() -> Func:
    # jsonb_extract_path_text is immutable, as a generated column requires; NULL (no description) reads as "".
    return Func(
        models.F("metadata"),
        Value(DESCRIPTION_KEY),
        function="jsonb_extract_path_text",
        output_field=models.TextField(),
    )


class Chunk(models.Model):
    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="chunks")
    path = models.CharField(
        max_length=1024, blank=True, default="", help_text="File path inside a root; empty for skills."
    )
    generation = models.PositiveIntegerField(default=0)
    chunk_index = models.PositiveIntegerField()
    content = models.TextField()
    context_prefix = models.TextField(blank=True, default="")
    language = models.CharField(max_length=32, blank=True, default="")
    symbol = models.CharField(max_length=512, blank=True, default="")
    start_line = models.PositiveIntegerField()
    end_line = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64)
    # No fixed dimension: each model's vectors get a partial HNSW index on
    # embedding::halfvec(N), created when the model is first used.
    embedding = VectorField(null=True)
    # Words first, vectors behind (sources/pipeline/vectors.py): a chunk is written, and searchable by its words, as
    # soon as its file is chunked; its vector follows. Pending: no vector yet, or the vector of the chunk it replaced
    # (a changed file keeps meaning search until its new vectors exist).
    vector_pending = models.BooleanField(default=False, db_default=False)
    # How its vector was made (sources.ingest.vector_identity: the model and how long texts are embedded): a chunk
    # written again with the same text and identity keeps its vector instead of being embedded again.
    embedded_as = models.CharField(max_length=64, blank=True, default="", db_default="")
    embedding_model = models.ForeignKey(EmbeddingModel, null=True, on_delete=models.PROTECT, related_name="chunks")
    # The chunker identity that made it (sources.chunking.chunker_identity); "2" on rows from before per-strategy
    # versions (migration 0021). Informational: the fingerprint decides what is current.
    chunking_version = models.CharField(max_length=64)
    metadata = models.JSONField(default=dict, blank=True)
    # Weighted for the lexical channel: symbol and path (A) over headings (B)
    # over body (C); BM25 counts an A occurrence 4 times, B twice (lexical.py).
    # The contextual description comes last, as body: without one the
    # concatenation adds nothing, so every tsvector (and every BM25
    # statistic) is exactly what it was before descriptions existed.
    search_vector = models.GeneratedField(
        expression=(
            SearchVector("symbol", _identifier_words("symbol"), _identifier_words("path"), config="english", weight="A")
            + SearchVector("context_prefix", config="english", weight="B")
            + SearchVector(_identifier_words("content"), config="english", weight="C")
            + SearchVector(_identifier_words(_description()), config="english", weight="C")
        ),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "generation", "path", "chunk_index"], name="chunk_unique_position"
            ),
        ]
        indexes = [
            GinIndex(fields=["search_vector"], name="sources_chunk_search_gin"),
            models.Index(
                fields=["source", "generation", "id"],
                condition=models.Q(vector_pending=True),
                name="sources_chunk_vector_pending",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source.key}#{self.chunk_index}"

    @property
    def citation(self) -> str:
        return citation_text(
            self.path or self.source.key, self.start_line, self.end_line, anchor=self.metadata.get("anchor", "")
        )


class ChunkDescription(models.Model):
    """A contextual description, cached under the hash of what it was written from (sources/contextual.py).

    The key covers the document's content hash, the chunk's text and the
    describing model's identity with the prompt's version, so an unchanged
    chunk is never described twice: not by a re-index, not after a switch of
    embedding model, not by another root holding the same file.
    """

    key = models.CharField(max_length=64, primary_key=True)
    description = models.TextField()
    model = models.CharField(
        max_length=255, help_text="The identity that wrote it (RAG_CONTEXTUAL_MODEL and prompt version)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.key
