"""How a local model runs, and how that is written in its name.

The backend is part of a local model's identity: ``all-MiniLM-L6-v2`` runs
on PyTorch (sentence-transformers), ``all-MiniLM-L6-v2#onnx`` on ONNX
Runtime, ``all-MiniLM-L6-v2#onnx-int8`` on ONNX Runtime with weights
quantised to int8, and ``all-MiniLM-L6-v2#auto`` on whichever of the first
two this machine measured faster for the job (choice.py). Their vectors differ a little, so an EmbeddingModel row
per backend keeps them apart: switching RAG_EMBEDDING_BACKEND names another
model, which re-embeds (a root's blue/green generation, a skill's
fingerprint), and the query side, which knows a model by its row's name,
embeds queries with the backend the chunks were embedded with.
"""

from sources.embedding.base import EmbeddingError

TORCH = "torch"
ONNX = "onnx"
ONNX_INT8 = "onnx-int8"
# torch for bulk and onnx for queries, or the reverse, whichever this machine runs faster (choice.py): one
# identity, since the two agree within the rule (cosine >= 0.999), and not torch's or onnx's, so a switch re-embeds.
AUTO = "auto"
BACKENDS = (TORCH, ONNX, ONNX_INT8, AUTO)
# "@" already means dimensions for API models; "#" never ends a model name
# or a sensible path, and torch adds nothing, so existing rows keep their names.
SEPARATOR = "#"


def backend_validate(backend: str) -> str:
    if backend not in BACKENDS:
        raise EmbeddingError(f"unknown embedding backend {backend!r}; valid backends: {', '.join(BACKENDS)}")
    return backend


def local_name(name: str, backend: str) -> str:
    """The model row's name of local model ``name`` run on ``backend``; a name that states its backend keeps it."""
    base, stated = local_name_parse(name)
    if base != name:  # "model#onnx" as a root's model: what it says wins over the setting
        backend = stated
    backend_validate(backend)
    return base if backend == TORCH else f"{base}{SEPARATOR}{backend}"


def local_name_parse(name: str) -> tuple[str, str]:
    """``"all-MiniLM-L6-v2#onnx-int8"`` -> ``("all-MiniLM-L6-v2", "onnx-int8")``; no known suffix: torch."""
    base, separator, backend = name.rpartition(SEPARATOR)
    if separator and base and backend in BACKENDS:
        return base, backend
    return name, TORCH
