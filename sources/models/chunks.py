"""The one chunk table every source indexes into."""

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Func, Value
from pgvector.django import VectorField

from sources.models.base import EmbeddingModel, Source


# Identifiers are indexed as the words people type: "ChunkSearch.run_query",
# "os.path.join" -> "Chunk Search run query", "os path join" (PostgreSQL's
# parser keeps dotted names whole). The lexical channel applies the same
# transform to the query (retrieval/lexical.py), so both sides agree.
IDENTIFIER_CAMEL = (r"([a-z0-9])([A-Z])", r"\1 \2")
IDENTIFIER_SEPARATORS = "._/-:"


def _identifier_words(field: str) -> Func:
    pattern, replacement = IDENTIFIER_CAMEL
    camel = Func(models.F(field), Value(pattern), Value(replacement), Value("g"), function="regexp_replace",
                 output_field=models.TextField())
    return Func(camel, Value(IDENTIFIER_SEPARATORS), Value(" " * len(IDENTIFIER_SEPARATORS)), function="translate",
                output_field=models.TextField())


class Chunk(models.Model):
    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="chunks")
    path = models.CharField(max_length=1024, blank=True, default="", help_text="File path inside a root; empty for skills.")
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
    embedding_model = models.ForeignKey(EmbeddingModel, null=True, on_delete=models.PROTECT, related_name="chunks")
    chunking_version = models.CharField(max_length=32)
    metadata = models.JSONField(default=dict, blank=True)
    # Weighted for the lexical channel: symbol and path (A) over headings (B)
    # over body (C); BM25 counts an A occurrence 4 times, B twice (lexical.py).
    search_vector = models.GeneratedField(
        expression=(
            SearchVector("symbol", _identifier_words("symbol"), _identifier_words("path"), config="english", weight="A")
            + SearchVector("context_prefix", config="english", weight="B")
            + SearchVector(_identifier_words("content"), config="english", weight="C")
        ),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "generation", "path", "chunk_index"], name="chunk_unique_position"),
        ]
        indexes = [GinIndex(fields=["search_vector"], name="sources_chunk_search_gin")]

    def __str__(self) -> str:
        return f"{self.source.key}#{self.chunk_index}"

    @property
    def citation(self) -> str:
        # path:start-end for files, skill:<slug>:start-end for skills.
        return f"{self.path or self.source.key}:{self.start_line}-{self.end_line}"
