"""One embedder per (provider, name) per process, and how a model name picks its provider."""

import threading

from sources.embedding.api import PREFIX as API_PREFIX
from sources.embedding.api import ApiEmbedder
from sources.embedding.backends import AUTO, local_name_parse
from sources.embedding.base import Embedder, EmbeddingError
from sources.embedding.choice import AutoEmbedder
from sources.embedding.local import LocalEmbedder, local_model_name

PROVIDERS = ("local", "api")

_cache: dict[tuple[str, str], Embedder] = {}
_lock = threading.Lock()


def model_reference(name: str, *, backend: str | None = None) -> tuple[str, str]:
    """A model as written in a setting or a root's field -> (provider, name): ``api:<model>[@<dims>]`` or a local name
    or path; with ``backend`` (RAG_EMBEDDING_BACKEND), a local model's name says what runs it (local_model_name)."""
    if name.startswith(API_PREFIX):
        return "api", name.removeprefix(API_PREFIX).strip()
    return "local", name if backend is None else local_model_name(name, backend)


def embedder_for(*, provider: str, name: str, device: str = "cpu") -> Embedder:
    if provider not in PROVIDERS:
        raise EmbeddingError(f"unknown embedding provider {provider!r}; valid providers: {', '.join(PROVIDERS)}")
    key = (provider, name)
    with _lock:
        if key not in _cache:
            _cache[key] = _embedder_new(provider=provider, name=name, device=device)
        return _cache[key]


def _embedder_new(*, provider: str, name: str, device: str) -> Embedder:
    if provider == "api":
        return ApiEmbedder(name)
    if local_name_parse(name)[1] == AUTO:
        return AutoEmbedder(name, device=device)
    return LocalEmbedder(name, device=device)


def embedder_loaded(*, provider: str, name: str) -> bool:
    """Whether this process has loaded the model already (never loads it)."""
    embedder = _cache.get((provider, name))
    return embedder is not None and embedder.loaded
