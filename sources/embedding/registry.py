"""One embedder per (provider, name) per process."""

import threading

from sources.embedding.base import EmbeddingError, Embedder
from sources.embedding.local import LocalEmbedder

PROVIDERS = ("local",)

_cache: dict[tuple[str, str], Embedder] = {}
_lock = threading.Lock()


def embedder_for(*, provider: str, name: str, device: str = "cpu") -> Embedder:
    if provider not in PROVIDERS:
        raise EmbeddingError(f"unknown embedding provider {provider!r}; valid providers: {', '.join(PROVIDERS)}")
    key = (provider, name)
    with _lock:
        if key not in _cache:
            _cache[key] = LocalEmbedder(name, device=device)
        return _cache[key]


def embedder_loaded(*, provider: str, name: str) -> bool:
    """Whether this process has loaded the model already (never loads it)."""
    embedder = _cache.get((provider, name))
    return embedder is not None and embedder.loaded
