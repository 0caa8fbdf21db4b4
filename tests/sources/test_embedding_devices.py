"""RAG_EMBEDDING_DEVICE: auto picks the GPU when torch sees one, cuda without one fails saying why, and what a GPU
changes (ONNX falls back to PyTorch, fp16 only when it keeps the vectors) is decided by pure functions."""

import numpy as np
import pytest
import torch

from rag_site.settings_registry import SETTINGS
from sources.embedding import EmbeddingError
from sources.embedding.device import (
    DEVICE_PATTERN,
    DEVICE_VALUES,
    device_resolve,
    device_valid,
    runs_on_torch,
    vectors_agree,
)
from sources.embedding.local import LocalEmbedder, precision_choose
from tests.test_configuration import import_settings_with

pytestmark = pytest.mark.unit


def unit_rows(count: int, dimensions: int = 16, seed: int = 3) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(count, dimensions)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.fixture
def gpus(monkeypatch):
    """Let torch report ``count`` GPUs (0: none) to the selection function."""

    def see(count: int) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: count)

    return see


def test_auto_is_the_cpu_on_this_machine():
    assert not torch.cuda.is_available()  # the development machine: a CPU build of torch
    assert device_resolve("auto") == "cpu"
    assert device_resolve("cpu") == "cpu"


def test_auto_is_the_first_gpu_when_torch_sees_one(gpus):
    gpus(2)
    assert device_resolve("auto") == "cuda"
    assert device_resolve("cuda") == "cuda"
    assert device_resolve("cuda:1") == "cuda:1"
    with pytest.raises(
        EmbeddingError, match=r"RAG_EMBEDDING_DEVICE=cuda:2 but torch sees 2 GPU\(s\): cuda:0 to cuda:1"
    ):
        device_resolve("cuda:2")


@pytest.mark.parametrize("setting", ["cuda", "cuda:0"])
def test_cuda_without_a_gpu_fails_saying_why(setting):
    with pytest.raises(EmbeddingError, match=rf"RAG_EMBEDDING_DEVICE={setting} but torch sees no GPU"):
        device_resolve(setting)


def test_cuda_without_a_gpu_fails_when_the_model_loads_not_before():
    embedder = LocalEmbedder("all-MiniLM-L6-v2", device="cuda")  # constructing it asks nothing of torch
    assert not embedder.loaded and embedder.runs_on == ""
    with pytest.raises(EmbeddingError, match="RAG_EMBEDDING_DEVICE=cuda but torch sees no GPU"):
        embedder.embed(["a query"])
    assert not embedder.loaded


def test_a_model_on_auto_says_what_runs_it():
    embedder = LocalEmbedder("all-MiniLM-L6-v2", device="auto")
    assert embedder.embed(["a query"]).shape == (1, 384)
    assert embedder.runs_on == "cpu torch"


@pytest.mark.parametrize(
    ("backend", "device", "torch_runs_it"),
    [
        ("torch", "cpu", True),
        ("onnx", "cpu", False),
        ("onnx-int8", "cpu", False),
        ("torch", "cuda", True),
        ("onnx", "cuda", True),  # ONNX's vectors are PyTorch's (cosine >= 0.999): the GPU runs them on PyTorch
        ("onnx", "cuda:1", True),
        ("onnx-int8", "cuda", False),  # int8 is ~0.99 to PyTorch: its rows stay ONNX's, on the CPU
    ],
)
def test_onnx_falls_back_to_pytorch_on_a_gpu_but_int8_does_not(backend, device, torch_runs_it):
    assert runs_on_torch(backend, device) is torch_runs_it


def test_vectors_agree_only_when_every_row_passes_the_identity_rule():
    full = unit_rows(8)
    assert vectors_agree(full, full.astype(np.float16))  # fp16 rounding alone keeps cosine ~1
    drifted = full.copy()
    drifted[5] = unit_rows(1, seed=9)[0]  # one text's vector elsewhere: the rest do not outvote it
    assert not vectors_agree(full, drifted)
    nudged = full + 0.02 * unit_rows(8, seed=11)  # cosine ~0.9998 per row
    assert vectors_agree(full, nudged)
    assert not vectors_agree(full, full + 0.2 * unit_rows(8, seed=11))


def test_vectors_agree_refuses_nan_and_a_shape_mismatch():
    full = unit_rows(4)
    broken = full.copy()
    broken[0, 0] = np.nan  # fp16 overflow shows up as NaN
    assert not vectors_agree(full, broken)
    assert not vectors_agree(full, full[:3])


class _DriftingModel:
    """A stand-in with encode/half/float whose half precision moves every vector: fp16 must be refused."""

    def __init__(self) -> None:
        self.dtype = "fp32"

    def encode(self, texts, **_):
        rows = unit_rows(len(texts))
        return rows if self.dtype == "fp32" else rows[::-1].copy()

    def half(self):
        self.dtype = "fp16"
        return self

    def float(self):
        self.dtype = "fp32"
        return self


def test_fp16_is_refused_and_undone_when_its_vectors_drift():
    model = _DriftingModel()
    assert precision_choose(model, "drifting") == "fp32"
    assert model.dtype == "fp32"


def test_fp16_is_kept_for_the_bundled_model():
    """What a GPU does at load, run on the CPU: MiniLM's half-precision vectors pass the rule."""
    from sentence_transformers import SentenceTransformer

    from sources.embedding.local import model_path

    model = SentenceTransformer(model_path("all-MiniLM-L6-v2"), device="cpu")
    assert precision_choose(model, "all-MiniLM-L6-v2") == "fp16"
    assert next(model.parameters()).dtype == torch.float16


def test_the_setting_and_the_resolver_accept_the_same_values():
    setting = SETTINGS["RAG_EMBEDDING_DEVICE"]
    assert setting.pattern == DEVICE_PATTERN and setting.valid == DEVICE_VALUES
    assert setting.default == "auto"
    for value in ("auto", "cpu", "cuda", "cuda:0", "cuda:7"):
        assert device_valid(value)
    for value in ("gpu", "CUDA", "cuda:", "cuda:x", "mps", "cpu,cuda", ""):
        assert not device_valid(value)


@pytest.mark.parametrize("value", ["gpu", "cuda:", "cuda0"])
def test_a_bad_device_fails_at_start_up_naming_the_valid_values(value):
    result = import_settings_with(RAG_EMBEDDING_DEVICE=value)
    assert result.returncode != 0
    last = result.stderr.splitlines()[-1]
    assert "ImproperlyConfigured" in last
    assert f"RAG_EMBEDDING_DEVICE: unknown embedding device {value!r}; valid: auto, cpu, cuda, cuda:N" in last


def test_a_gpu_device_passes_the_settings_without_a_gpu():
    """Settings never ask torch: a cuda worker's settings load anywhere, and its model says why it cannot run."""
    assert import_settings_with(RAG_EMBEDDING_DEVICE="cuda:1").returncode == 0
