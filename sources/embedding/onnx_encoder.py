"""A sentence-transformers model's forward pass on ONNX Runtime.

Reproduces what sentence-transformers does for a Transformer -> mean
Pooling (-> Normalize) model: the model's own tokenizer (texts stripped,
lower-cased if the model says so, cut at ``max_seq_length``), the exported
transformer, the attention-masked mean of the token vectors, and L2
normalisation. Measured against PyTorch on the bundled MiniLM: cosine
>= 0.999 for every text (tests/sources/test_onnx_backend.py). Other pooling
modes are refused rather than approximated.
"""

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from sources.embedding.base import EmbeddingError


def onnx_threads() -> int:
    """RAG_TORCH_THREADS, which sets the local models' threads whatever runs them; 0: one per usable core."""
    threads = int(os.environ.get("RAG_TORCH_THREADS") or 0)
    return threads if threads > 0 else len(os.sched_getaffinity(0))


class OnnxEncoder:
    """The few members of SentenceTransformer that LocalEmbedder uses: encode, tokenizer, max_seq_length."""

    def __init__(self, model_dir: Path, onnx_file: Path) -> None:
        import onnxruntime
        from transformers import AutoTokenizer

        refusal = onnx_refusal(model_dir)
        if refusal:
            raise EmbeddingError(f"{refusal}: run it on PyTorch (its name without #onnx)")
        config = _json(model_dir / "sentence_bert_config.json")
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.max_seq_length = int(config.get("max_seq_length") or self.tokenizer.model_max_length)
        self.lower_case = bool(config.get("do_lower_case"))
        options = onnxruntime.SessionOptions()
        # Intra-op threads split one batch across cores; inter-op parallelism
        # buys nothing for a single chain of layers and would add threads.
        options.intra_op_num_threads = onnx_threads()
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        # Idle pool threads sleep instead of spinning: the worker shares its
        # cores with PostgreSQL and the web processes, which a spin would starve.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.dimensions = int(self.session.get_outputs()[0].shape[-1])

    def get_embedding_dimension(self) -> int:
        return self.dimensions

    def encode(
        self,
        texts: list[str],
        *,
        batch_size: int = 64,
        convert_to_numpy: bool = True,
        normalize_embeddings: bool = True,
        show_progress_bar: bool = False,
    ) -> np.ndarray:
        parts = [
            self._batch(texts[start : start + batch_size], normalize_embeddings)
            for start in range(0, len(texts), batch_size)
        ]
        return np.concatenate(parts) if parts else np.zeros((0, self.dimensions), dtype=np.float32)

    def _batch(self, texts: list[str], normalize: bool) -> np.ndarray:
        # As sentence-transformers' Transformer.tokenize prepares texts.
        texts = [text.strip().lower() if self.lower_case else text.strip() for text in texts]
        encoded = self.tokenizer(
            texts, padding=True, truncation="longest_first", max_length=self.max_seq_length, return_tensors="np"
        )
        feed = {name: encoded[name].astype(np.int64) for name in self.input_names}
        (tokens,) = self.session.run(["last_hidden_state"], feed)
        mask = encoded["attention_mask"].astype(np.float32)[:, :, None]
        pooled = (tokens * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        if normalize:
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            pooled = pooled / np.clip(norms, 1e-12, None)  # torch.nn.functional.normalize's eps
        return pooled.astype(np.float32, copy=False)


def onnx_refusal(model_dir: Path) -> str:
    """Why this backend cannot run the saved model in ``model_dir`` ("" if it can), read from its config files."""
    modules = _json(model_dir / "modules.json") or []
    kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return (
            f"the ONNX backend runs Transformer -> Pooling (-> Normalize) models; {model_dir} has "
            f"{' -> '.join(kinds) or 'no modules.json'}"
        )
    modes = pooling_modes(_json(model_dir / modules[1]["path"] / "config.json"))
    if modes not in (["mean"], ["mean_tokens"]):
        return f"the ONNX backend pools by the mean of the tokens; {model_dir} pools by {', '.join(modes)}"
    return ""


def pooling_modes(config: dict[str, Any]) -> list[str]:
    """A Pooling module's modes, as sentence-transformers 6 writes them (``"pooling_mode": "mean"``) or as
    earlier versions did (``"pooling_mode_mean_tokens": true``)."""
    if "pooling_mode" in config:
        mode = config["pooling_mode"]
        return sorted(mode) if isinstance(mode, list) else [str(mode)]
    return sorted(
        key.removeprefix("pooling_mode_")
        for key, on in config.items()
        if key.startswith("pooling_mode_") and on is True
    )


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        raise EmbeddingError(f"{path} is not valid JSON: {exc}") from exc
