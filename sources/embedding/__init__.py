"""Embedding providers: local sentence-transformers models and OpenAI-compatible APIs. Models load lazily, once per
process."""

from sources.embedding.base import Embedder, EmbeddingError, ModelSpec
from sources.embedding.registry import embedder_for, model_reference

__all__ = ["EmbeddingError", "Embedder", "ModelSpec", "embedder_for", "model_reference"]
