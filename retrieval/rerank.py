"""Optional cross-encoder reranking of fused search results.

The model is a local sentence-transformers ``CrossEncoder``, loaded lazily
once per process; the hub is never contacted, so a missing model fails fast
with a message. No Django here: settings come in as arguments.
"""

import logging
import os
import threading
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

logger = logging.getLogger(__name__)

_TRUE = {"1", "ON", "YES", "TRUE"}  # huggingface_hub's spelling of a true environment flag


class RerankError(Exception):
    """The rerank model could not be loaded or run."""


class CrossEncoderScorer:
    """A local sentence-transformers CrossEncoder that scores (query, text) pairs in 0..1."""

    def __init__(self, name: str, *, device: str = "cpu") -> None:
        self.name = name
        self.device = device
        self._model = None
        self._lock = threading.Lock()

    def _load(self):
        # Double-checked: web threads may ask for the model at the same time.
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = self._build()
        return self._model

    def _build(self):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from huggingface_hub import constants as hub
        from sentence_transformers import CrossEncoder
        from torch import nn

        from sources.embedding.device import device_resolve

        # huggingface_hub reads HF_HUB_OFFLINE once, on first import, which may predate the
        # default above; without it even a local_files_only load asks the hub for its agent
        # registry (huggingface_hub 2.4, while building request headers).
        hub.HF_HUB_OFFLINE = hub.HF_HUB_OFFLINE or os.environ["HF_HUB_OFFLINE"].upper() in _TRUE
        try:
            # An explicit Sigmoid replaces the saved activation: some rerankers save Identity
            # (raw logits), and predict applies exactly one activation.
            # RAG_EMBEDDING_DEVICE: auto is the GPU when there is one; cuda without one fails here, with the reason.
            device = device_resolve(self.device)
            model = CrossEncoder(self.name, device=device, local_files_only=True, activation_fn=nn.Sigmoid())
        except Exception as exc:  # noqa: BLE001 - report any loader failure plainly
            hint = "" if Path(self.name).exists() else " (not a local path; the hub is not contacted)"
            raise RerankError(f"cannot load rerank model {self.name!r}{hint}: {exc}") from exc
        # Only the sigmoid of a single logit reads as a relevance in 0..1.
        if model.num_labels != 1:
            raise RerankError(f"rerank model {self.name!r} has {model.num_labels} labels, not one")
        return model

    def score(self, query: str, texts: list[str]) -> list[float]:
        """Relevance of each text to ``query`` in 0..1, in the order given."""
        if not texts:
            return []
        model = self._load()
        try:
            scores = model.predict([(query, text) for text in texts], show_progress_bar=False, convert_to_numpy=True)
        except Exception as exc:  # noqa: BLE001
            raise RerankError(f"reranking with {self.name!r} failed: {exc}") from exc
        return [float(value) for value in scores]


_scorers: dict[tuple[str, str], CrossEncoderScorer] = {}
_scorers_lock = threading.Lock()


def cross_encoder_for(name: str, *, device: str = "cpu") -> CrossEncoderScorer:
    """The process-wide scorer for ``name`` on ``device``; its model loads on first use."""
    with _scorers_lock:
        scorer = _scorers.get((name, device))
        if scorer is None:
            scorer = _scorers[(name, device)] = CrossEncoderScorer(name, device=device)
        return scorer


# An item's id, whatever its type: the order hands back the ids it was given.
Item = TypeVar("Item", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Reranked(Generic[Item]):
    order: list[tuple[Item, float]]
    scores: dict[Item, float]
    skipped: str = ""


def _skipped(reason: str) -> Reranked[Any]:
    return Reranked(order=[], scores={}, skipped=reason)


def rerank(
    query: str,
    items: Sequence[tuple[Item, str]],
    *,
    scorer: CrossEncoderScorer | None,
    max_chunks: int,
    min_chars: int,
    score_threshold: float,
) -> Reranked[Item]:
    """Reorder the first ``max_chunks`` fused ``(id, text)`` items by cross-encoder score.

    ``order`` keeps the items scoring at least ``score_threshold``, best first
    (ties keep the fused order); ``scores`` has every scored item. Never raises:
    when the reranker does not run, ``skipped`` says why and the caller keeps
    its fused order.
    """
    if scorer is None:
        return _skipped("no rerank model configured (RAG_RERANK_MODEL)")
    head = list(items[:max_chunks])
    if not head:
        return _skipped("nothing to rerank")
    chars = sum(len(text) for _, text in head)
    # A handful of short results is not worth a model call.
    if chars < min_chars:
        return _skipped(f"{chars} characters, below the rerank threshold of {min_chars}")
    try:
        scored = list(zip((id_ for id_, _ in head), scorer.score(query, [text for _, text in head]), strict=True))
    except Exception as exc:  # noqa: BLE001 - a broken reranker must not break search
        reason = str(exc) if isinstance(exc, RerankError) else f"reranking failed: {exc!r}"
        logger.warning("rerank skipped: %s", reason)
        return _skipped(reason)
    order = sorted((pair for pair in scored if pair[1] >= score_threshold), key=lambda pair: -pair[1])
    return Reranked(order=order, scores=dict(scored), skipped="")
