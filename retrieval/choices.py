"""Enumerated options that settings validate at start-up (pure Python: settings imports it)."""

import enum
import re


class Choice(enum.StrEnum):
    @classmethod
    def parse(cls, value: str):
        """The member for ``value``, or a ValueError that lists the valid values."""
        try:
            return cls(value)
        except ValueError:
            what = re.sub(r"(?<!^)([A-Z])", r" \1", cls.__name__).lower()  # FusionMethod -> fusion method
            raise ValueError(f"unknown {what} {value!r}; valid: {', '.join(m.value for m in cls)}") from None


class FusionMethod(Choice):
    CONVEX = "convex"  # bounded scores as they are, unbounded ones divided by their top score
    MINMAX = "minmax"  # every channel min-max normalised over its candidates
    RRF = "rrf"  # (weighted) Reciprocal Rank Fusion


class LexicalRanking(Choice):
    BM25 = "bm25"  # Okapi BM25 over the full-text candidates, computed in SQL
    TS_RANK = "ts_rank"  # PostgreSQL's ts_rank (no inverse document frequency)


class RerankBackend(Choice):
    CROSS_ENCODER = "cross-encoder"  # a local sentence-transformers CrossEncoder (RAG_RERANK_MODEL)
    LLM = "llm"  # the language model (RAG_LLM_*) picks and orders the relevant passages
    API = "api"  # a rerank service (Cohere, Jina, Voyage, TEI): query and documents in, scores out
