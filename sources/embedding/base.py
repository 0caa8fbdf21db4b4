from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np


class EmbeddingError(RuntimeError):
    """The model could not be loaded or could not embed; the message says why."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """What identifies a model: vectors from two different specs never mix."""

    provider: str
    name: str
    dimensions: int
    normalized: bool

    @property
    def identity(self) -> str:
        return f"{self.provider}:{self.name}:{self.dimensions}:{'norm' if self.normalized else 'raw'}"


class Embedder(Protocol):
    @property
    def spec(self) -> ModelSpec: ...

    @property
    def loaded(self) -> bool:
        """Whether this process has the model ready (asking never loads it)."""
        ...

    @property
    def runs_on(self) -> str:
        """What runs the model here ("cuda fp16", "cpu onnx", "api"); "" until it has loaded (never loads it)."""
        ...

    def embed(
        self,
        texts: list[str],
        *,
        batch_size: int = 64,
        pieces: bool = False,
        on_batch: Callable[[], None] | None = None,
        purpose: str = "bulk",
    ) -> np.ndarray:
        """Return a float32 array of shape (len(texts), dimensions); ``pieces``:
        texts longer than the model reads are embedded in pieces and averaged;
        ``on_batch`` is called after each batch; ``purpose``: ``bulk`` (chunks)
        or ``query`` (a search's query), which an ``#auto`` model may run on
        different backends (choice.py)."""
        ...
