"""Embedding providers. Models load lazily, once per process."""

from sources.embedding.base import EmbeddingError, Embedder, ModelSpec
from sources.embedding.registry import embedder_for

__all__ = ["EmbeddingError", "Embedder", "ModelSpec", "embedder_for"]
