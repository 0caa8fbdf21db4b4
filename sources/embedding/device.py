"""Where a local model runs: RAG_EMBEDDING_DEVICE resolved to a torch device, and what a GPU changes.

``auto`` (the default) is the first GPU when torch sees one, else the CPU;
``cuda`` or ``cuda:N`` insists on a GPU and fails when the model loads if
torch sees none. On a GPU the model runs on PyTorch whatever the backend,
except ``onnx-int8`` (below), and in fp16 when its vectors pass the
identity rule against fp32 on this GPU. Pure functions but device_resolve,
which asks torch (imported only then).
"""

import re

import numpy as np

from sources.embedding.backends import ONNX, TORCH
from sources.embedding.base import EmbeddingError

AUTO = "auto"
CPU = "cpu"
CUDA = "cuda"
# The values RAG_EMBEDDING_DEVICE accepts (rag_site/settings_registry.py checks it at start-up with the same pattern).
DEVICE_PATTERN = r"auto|cpu|cuda(:[0-9]+)?"
DEVICE_VALUES = "auto, cpu, cuda, cuda:N"
# Two forms of one model's vectors count as the same model when every text's
# cosine reaches this (the rule that let onnx replace torch without a new identity).
SAME_VECTORS_COSINE = 0.999
# What fp16 is tried on before it is kept: prose, code, a query, a long text
# (past 256 word pieces, so truncation is exercised), short and odd ones.
PRECISION_SAMPLE = (
    "how do I register a model admin",
    "def handler(request, *args):\n    if not request.user.is_staff:\n        raise PermissionDenied\n",
    "The quick brown fox jumps over the lazy dog while the cat watches from the window.",
    "SELECT id, name FROM sources_chunk WHERE root_id = %s ORDER BY path LIMIT 50;",
    "Straße, café, naïve: ünïcödé and 漢字テスト",
    "x",
    "A migration adds the column with a default, then a second one drops the default "
    "so that existing rows keep their value and new ones must name it. " * 12,
    "class Meta:\n    ordering = ['-created']\n    indexes = [models.Index(fields=['root', 'path'])]\n" * 6,
)


def device_valid(setting: str) -> bool:
    return re.fullmatch(DEVICE_PATTERN, setting) is not None


def device_resolve(setting: str) -> str:
    """RAG_EMBEDDING_DEVICE -> the torch device a model loads on: ``cpu``, ``cuda`` or ``cuda:N``.

    Called when a model loads, never at start-up: importing torch costs a
    second or two, and a web process that never embeds should not pay it.
    """
    if not device_valid(setting):
        raise EmbeddingError(f"unknown embedding device {setting!r}; valid: {DEVICE_VALUES}")
    if setting == CPU:
        return CPU
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if setting == AUTO:
        return CUDA if gpus else CPU
    if not gpus:
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        raise EmbeddingError(
            f"RAG_EMBEDDING_DEVICE={setting} but torch sees no GPU (torch {torch.__version__}, {build}): "
            "check the driver and CUDA_VISIBLE_DEVICES, or set RAG_EMBEDDING_DEVICE=auto or cpu"
        )
    index = int(setting.partition(":")[2] or 0)
    if index >= gpus:
        raise EmbeddingError(f"RAG_EMBEDDING_DEVICE={setting} but torch sees {gpus} GPU(s): cuda:0 to cuda:{gpus - 1}")
    return setting


def on_gpu(device: str) -> bool:
    return device.startswith(CUDA)


def runs_on_torch(backend: str, device: str) -> bool:
    """Whether a model named for ``backend`` runs on PyTorch on the resolved ``device``.

    On a GPU, ``onnx`` falls back to PyTorch (the ONNX session here is CPU
    only, and a GPU is ~70x two cores): its rows' vectors and PyTorch's agree
    (cosine >= 0.999 on every text), so the row keeps its name. ``onnx-int8``
    does not: measured on 120 varied texts, int8 against PyTorch fp32 is
    cosine 0.984 at worst, 0.990 on average, so GPU vectors would not match
    the rows it wrote; it stays on ONNX Runtime on the CPU.
    """
    return backend == TORCH or (backend == ONNX and on_gpu(device))


def vectors_agree(reference: np.ndarray, other: np.ndarray, *, threshold: float = SAME_VECTORS_COSINE) -> bool:
    """Whether every row of ``other`` has cosine >= ``threshold`` with the same row of ``reference``."""
    if reference.shape != other.shape:
        return False
    a = reference.astype(np.float64)
    b = other.astype(np.float64)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    cosines = (a * b).sum(axis=1) / np.clip(norms, 1e-12, None)
    return bool(np.all(np.isfinite(cosines)) and np.all(cosines >= threshold))
