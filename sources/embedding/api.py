"""Embeddings from an OpenAI-compatible ``/embeddings`` endpoint (RAG_LLM_BASE_URL), through ``kernel.llm``.

Where a model is named (RAG_EMBEDDING_MODEL, a root's or a segment's model)
``api:<model>`` asks the endpoint for the model's own vectors and
``api:<model>@<dimensions>`` for shortened ones (the request's
``dimensions``, as text-embedding-3 models allow). The model row's name is
what follows ``api:``, so the query side, which knows a model by provider and
name only, sends exactly the request the chunks were embedded with.

Calls go through the one LLM client: its retries, its breaker, no fallback
to another model (vectors of two models never compare). Every answer is
checked against the model's dimensions; a different size is refused with a
message, never stored or compared.
"""

import threading
from collections.abc import Callable

import numpy as np

from kernel.llm import LLMError, llm_embed
from sources.embedding.base import EmbeddingError, ModelSpec

PREFIX = "api:"
# API models read thousands of tokens, far more than a chunk; the cap only
# keeps one pathological text from a 400 that would fail its whole batch.
MAX_INPUT_CHARS = 16_000
# What the first call of a model without stated dimensions embeds to learn them.
PROBE_TEXT = "dimension probe"


def api_name_parse(name: str) -> tuple[str, int | None]:
    """``"text-embedding-3-small@256"`` -> ``("text-embedding-3-small", 256)``; no ``@<digits>``: no dimensions."""
    model, at, dimensions = name.rpartition("@")
    if not at or not dimensions.isdigit():
        model, dimensions = name, ""
    if not model.strip():
        raise EmbeddingError(f"{PREFIX}{name!r} names no model: write api:<model> or api:<model>@<dimensions>")
    if dimensions and int(dimensions) < 1:
        raise EmbeddingError(f"{PREFIX}{name}: the dimensions after @ must be a positive number")
    return model, int(dimensions) if dimensions else None


class ApiEmbedder:
    """One API model; its dimensions are the stated ones, or learned from its first answer."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.model, self.dimensions = api_name_parse(name)
        self._spec: ModelSpec | None = None if self.dimensions is None else self._make_spec(self.dimensions)
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._spec is not None

    @property
    def runs_on(self) -> str:
        return "api"

    @property
    def spec(self) -> ModelSpec:
        if self._spec is None:
            self.embed([PROBE_TEXT])  # one call, once per process: the answer's size is the model's
        assert self._spec is not None
        return self._spec

    def embed(
        self,
        texts: list[str],
        *,
        batch_size: int = 64,
        pieces: bool = False,
        on_batch: Callable[[], None] | None = None,
        purpose: str = "bulk",
    ) -> np.ndarray:
        """Unit vectors for ``texts``, ``batch_size`` per request; ``pieces`` and ``purpose`` are moot (the server
        reads whole texts, the same way for every job)."""
        if not texts:
            return np.zeros((0, self._spec.dimensions if self._spec else 0), dtype=np.float32)
        parts = []
        for start in range(0, len(texts), batch_size):
            # An empty input is refused by OpenAI; a space embeds as "nothing".
            batch = [text[:MAX_INPUT_CHARS] or " " for text in texts[start : start + batch_size]]
            try:
                vectors = np.asarray(
                    llm_embed(texts=batch, model=self.model, dimensions=self.dimensions), dtype=np.float32
                )
            except LLMError as exc:
                raise EmbeddingError(f"embedding with {PREFIX}{self.name} failed: {exc.message}") from exc
            self._check(vectors.shape[1])
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            parts.append(vectors / np.where(norms > 0, norms, 1.0))
            if on_batch is not None:
                on_batch()
        return np.concatenate(parts).astype(np.float32, copy=False)

    def _check(self, size: int) -> None:
        with self._lock:
            if self._spec is None:
                self._spec = self._make_spec(size)
                return
        expected = self._spec.dimensions
        if size != expected:
            raise EmbeddingError(
                f"{PREFIX}{self.name} answered with {size}-dimensional vectors, but the model has {expected} "
                "dimensions: the endpoint now serves another model under this name. Vectors of different sizes are "
                f"never mixed; name the size (api:{self.model}@{expected}) or choose another model name, "
                "which re-embeds."
            )

    def _make_spec(self, dimensions: int) -> ModelSpec:
        # embed() normalises every vector, whatever the server sends.
        return ModelSpec(provider="api", name=self.name, dimensions=dimensions, normalized=True)
