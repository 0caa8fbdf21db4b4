import json
import logging
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval.rerank import CrossEncoderScorer, RerankError, cross_encoder_for, rerank

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
QUERY = "how to tune postgres autovacuum"
TEXTS = [
    "alpha beta",
    "postgres vacuum tuning",
    "the quick brown fox",
    "django orm queries",
    "celery retries with a countdown",
    "autovacuum cost limit",
]
ITEMS = [(f"chunk-{n}", text) for n, text in enumerate(TEXTS)]
MISSING = "no-such-org/no-such-reranker"


def sigmoid_of_logits(path: str, query: str, texts: list[str]) -> list[float]:
    """The reference score, computed with plain transformers."""
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = BertForSequenceClassification.from_pretrained(path).eval()
    with torch.inference_mode():
        batch = tokenizer([query] * len(texts), texts, padding=True, truncation=True, return_tensors="pt")
        return torch.sigmoid(model(**batch).logits.squeeze(-1)).tolist()


class RecordingScorer:
    def __init__(self, result=None, error: Exception | None = None) -> None:
        self.result, self.error, self.calls = result, error, []

    def score(self, query: str, texts: list[str]) -> list[float]:
        self.calls.append(texts)
        if self.error:
            raise self.error
        return self.result(texts) if callable(self.result) else self.result


def test_importing_the_module_loads_no_django_and_no_model_libraries():
    heavy = "{'django', 'torch', 'huggingface_hub', 'sentence_transformers'}"
    code = f"import sys, retrieval.rerank; print(sorted({heavy} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_scores_are_one_probability_per_text_and_repeatable(tiny_model):
    scorer = cross_encoder_for(tiny_model)
    first = scorer.score(QUERY, TEXTS)
    assert len(first) == len(TEXTS)
    assert all(isinstance(value, float) and 0.0 <= value <= 1.0 for value in first)
    assert len(set(first)) == len(TEXTS)
    assert scorer.score(QUERY, TEXTS) == first
    assert scorer.score(QUERY, []) == []


def test_scores_are_the_sigmoid_of_the_logit_even_when_the_model_saves_raw_logits(tiny_model, tmp_path):
    from sentence_transformers import CrossEncoder
    from torch import nn

    expected = sigmoid_of_logits(tiny_model, QUERY, TEXTS)
    assert cross_encoder_for(tiny_model).score(QUERY, TEXTS) == pytest.approx(expected, abs=1e-5)

    raw = tmp_path / "raw-logits"
    shutil.copytree(tiny_model, raw)
    config = json.loads((raw / "config.json").read_text())
    config["sentence_transformers"] = {"activation_fn": "torch.nn.modules.linear.Identity"}
    (raw / "config.json").write_text(json.dumps(config))
    assert isinstance(CrossEncoder(str(raw), local_files_only=True).activation_fn, nn.Identity)
    assert cross_encoder_for(str(raw)).score(QUERY, TEXTS) == pytest.approx(expected, abs=1e-5)


def test_a_model_with_several_labels_is_refused(tiny_model, tmp_path):
    from transformers import AutoConfig, BertForSequenceClassification

    two_labels = tmp_path / "two-labels"
    shutil.copytree(tiny_model, two_labels)
    BertForSequenceClassification(AutoConfig.from_pretrained(tiny_model, num_labels=2)).save_pretrained(two_labels)
    with pytest.raises(RerankError, match="has 2 labels, not one"):
        CrossEncoderScorer(str(two_labels)).score(QUERY, TEXTS)


def test_one_scorer_per_name_and_device_loads_its_model_once(tiny_model):
    scorer = cross_encoder_for(tiny_model)
    assert cross_encoder_for(tiny_model) is scorer
    assert cross_encoder_for(tiny_model, device="meta") is not scorer
    scorer.score(QUERY, TEXTS[:1])
    model = scorer._model
    scorer.score(QUERY, TEXTS[1:])
    assert model is not None and scorer._model is model


def test_rerank_orders_the_items_by_model_score(tiny_model):
    scorer = cross_encoder_for(tiny_model)
    direct = dict(zip((id_ for id_, _ in ITEMS), scorer.score(QUERY, TEXTS), strict=True))
    result = rerank(QUERY, ITEMS, scorer=scorer, max_chunks=50, min_chars=0, score_threshold=0.0)
    assert result.skipped == ""
    assert [id_ for id_, _ in result.order] == sorted(direct, key=direct.__getitem__, reverse=True)
    assert dict(result.order) == result.scores == direct


def test_only_the_first_max_chunks_items_are_scored(tiny_model):
    result = rerank(QUERY, ITEMS, scorer=cross_encoder_for(tiny_model), max_chunks=3, min_chars=0, score_threshold=0.0)
    assert set(result.scores) == {"chunk-0", "chunk-1", "chunk-2"}
    assert {id_ for id_, _ in result.order} == set(result.scores)


def test_items_below_the_threshold_are_dropped_but_keep_their_score(tiny_model):
    scorer = cross_encoder_for(tiny_model)
    threshold = sorted(scorer.score(QUERY, TEXTS))[3]
    result = rerank(QUERY, ITEMS, scorer=scorer, max_chunks=50, min_chars=0, score_threshold=threshold)
    assert len(result.order) == 3
    assert all(score >= threshold for _, score in result.order)
    assert len(result.scores) == len(ITEMS)


def test_short_results_skip_the_model_counting_only_the_capped_items():
    scorer = RecordingScorer(result=[0.5])
    items = [("a", "x" * 30), ("b", "y" * 500)]
    result = rerank(QUERY, items, scorer=scorer, max_chunks=1, min_chars=100, score_threshold=0.0)
    assert result.skipped == "30 characters, below the rerank threshold of 100"
    assert (result.order, result.scores, scorer.calls) == ([], {}, [])


def test_ties_keep_the_fused_order():
    scorer = RecordingScorer(result=lambda texts: [0.5] * len(texts))
    result = rerank(QUERY, ITEMS, scorer=scorer, max_chunks=50, min_chars=0, score_threshold=0.0)
    assert [id_ for id_, _ in result.order] == [id_ for id_, _ in ITEMS]


def test_no_model_and_no_items_are_skipped_without_scoring():
    scorer = RecordingScorer(result=[])
    no_model = rerank(QUERY, ITEMS, scorer=None, max_chunks=50, min_chars=0, score_threshold=0.0)
    assert no_model.skipped == "no rerank model configured (RAG_RERANK_MODEL)"
    nothing = rerank(QUERY, [], scorer=scorer, max_chunks=50, min_chars=0, score_threshold=0.0)
    assert nothing.skipped == "nothing to rerank" and scorer.calls == []
    assert no_model.order == nothing.order == [] and no_model.scores == nothing.scores == {}


@pytest.mark.parametrize(
    ("scorer", "reason"),
    [
        (RecordingScorer(error=RuntimeError("out of memory")), "reranking failed: RuntimeError('out of memory')"),
        (RecordingScorer(result=[0.9]), "reranking failed: ValueError"),
    ],
    ids=["raises", "wrong-count"],
)
def test_a_failing_scorer_is_logged_and_skipped(scorer, reason, caplog):
    with caplog.at_level(logging.WARNING, logger="retrieval.rerank"):
        result = rerank(QUERY, ITEMS, scorer=scorer, max_chunks=50, min_chars=0, score_threshold=0.0)
    assert result.skipped.startswith(reason)
    assert (result.order, result.scores) == ([], {})
    assert [record.getMessage() for record in caplog.records] == [f"rerank skipped: {result.skipped}"]


def test_an_unknown_model_raises_rerank_error_without_touching_the_network(monkeypatch):
    from huggingface_hub import constants
    from huggingface_hub.utils import _detect_agent

    # As if huggingface_hub had been imported before the offline default was set,
    # and had not yet tried to fetch its agent registry.
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(_detect_agent, "_registry", None, raising=False)
    attempts = []

    def no_network(*args, **kwargs):
        attempts.append(args)
        raise OSError("network access in a test")

    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    hint = r"\(not a local path; the hub is not contacted\)"
    with pytest.raises(RerankError, match=rf"cannot load rerank model '{MISSING}' {hint}"):
        CrossEncoderScorer(MISSING).score(QUERY, TEXTS)
    assert attempts == []


def test_an_unknown_model_skips_the_rerank_with_its_name(caplog):
    with caplog.at_level(logging.WARNING, logger="retrieval.rerank"):
        scorer = cross_encoder_for(MISSING)
        result = rerank(QUERY, ITEMS, scorer=scorer, max_chunks=50, min_chars=0, score_threshold=0.0)
    assert MISSING in result.skipped and "the hub is not contacted" in result.skipped
    assert (result.order, result.scores) == ([], {})
    assert MISSING in caplog.text
