"""RAG_EMBEDDING_BACKEND=auto: the faster backend per job, measured once per machine and cached; vectors stay
torch's."""

import json

import numpy as np
import pytest
import torch

from sources.embedding import EmbeddingError, embedder_for
from sources.embedding import choice as choice_module
from sources.embedding.choice import (
    AutoEmbedder,
    BackendChoice,
    backend_choose,
    choice_file,
    choices_listed,
    machine_identity,
    machine_key,
)
from sources.embedding.device import vectors_agree
from sources.embedding.local import LocalEmbedder, local_model_name
from sources.embedding.onnx_export import onnx_cache_root

pytestmark = pytest.mark.unit


def test_the_faster_backend_takes_each_job():
    bulk = {"torch": 101.4, "onnx": 39.0}  # a 16-core machine (issue 44)
    query = {"torch": 15.1, "onnx": 6.1}  # the 2-core one
    assert backend_choose(bulk_per_second=bulk, query_ms=query, agree=True) == ("torch", "onnx")
    assert backend_choose(bulk_per_second={"torch": 30.0, "onnx": 33.0}, query_ms=query, agree=True) == (
        "onnx",
        "onnx",
    )


def test_backends_whose_vectors_differ_share_one_for_both_jobs():
    bulk, query = {"torch": 101.4, "onnx": 39.0}, {"torch": 15.1, "onnx": 6.1}
    assert backend_choose(bulk_per_second=bulk, query_ms=query, agree=False) == ("torch", "torch")


def test_auto_is_a_model_of_its_own():
    assert local_model_name("all-MiniLM-L6-v2", "auto") == "all-MiniLM-L6-v2#auto"
    embedder = embedder_for(provider="local", name="all-MiniLM-L6-v2#auto", device="cpu")
    assert isinstance(embedder, AutoEmbedder) and not embedder.loaded and embedder.runs_on == ""


@pytest.fixture
def var_dir(tmp_path, monkeypatch):
    """A fresh RAG_VAR_DIR whose ONNX exports are the session's (exporting again would only cost time)."""
    exports = onnx_cache_root()
    exports.mkdir(parents=True, exist_ok=True)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "onnx").symlink_to(exports)
    monkeypatch.setenv("RAG_VAR_DIR", str(tmp_path))
    # A quick measurement: the rule under test is what is chosen and kept, not how long timing takes.
    monkeypatch.setattr(choice_module, "BULK_BUDGET_SECONDS", 0.0)
    monkeypatch.setattr(choice_module, "QUERY_REPEATS", 3)
    return tmp_path


def test_the_choice_is_measured_once_cached_and_reused(var_dir, small_model, monkeypatch):
    name = f"{small_model}#auto"
    first = AutoEmbedder(name, device="auto")
    chosen = first.choice
    assert {chosen.bulk, chosen.query} <= {"torch", "onnx"} and chosen.agree
    assert set(chosen.bulk_per_second) == set(chosen.query_ms) == {"torch", "onnx"}
    cached = json.loads(choice_file().read_text())
    key = machine_key(machine_identity(model=str(small_model), device="cpu"))
    assert cached[key]["choice"]["bulk"] == chosen.bulk and cached[key]["machine"]["model"] == str(small_model)
    assert not list(choice_file().parent.glob(".backend-choice-*"))  # the temporary file was renamed into place

    def measure_again(_embedders):
        raise AssertionError("a cached choice is not measured again")

    monkeypatch.setattr(choice_module, "backend_measure", measure_again)
    assert AutoEmbedder(name, device="cpu").choice == chosen
    [row] = choices_listed()
    assert row["model"] == str(small_model) and f"bulk {chosen.bulk}" in row["choice"]


def test_another_machine_or_a_damaged_cache_measures_again(var_dir, small_model, monkeypatch):
    monkeypatch.setenv("RAG_TORCH_THREADS", "0")  # a worker: one thread per core (importing rag_site.wsgi sets 1)
    choice_file().write_text("{not json")
    assert AutoEmbedder(f"{small_model}#auto", device="cpu").choice.bulk_per_second
    monkeypatch.setenv("RAG_TORCH_THREADS", "1")  # a web process: its own entry, its own timings
    threads = torch.get_num_threads()
    try:
        assert AutoEmbedder(f"{small_model}#auto", device="cpu").choice.query_ms
    finally:
        torch.set_num_threads(threads)  # the model set it process-wide
    assert len(json.loads(choice_file().read_text())) == 2


def test_an_auto_model_embeds_bulk_and_queries_as_torch_does(var_dir, small_model):
    texts = ["one", "two words", "a much longer text " * 30, "def f(x):\n    return x + 1\n"]
    expected = LocalEmbedder(str(small_model)).embed(texts)
    embedder = AutoEmbedder(f"{small_model}#auto", device="cpu")
    assert vectors_agree(expected, embedder.embed(texts))
    assert vectors_agree(expected[:1], embedder.embed(texts[:1], purpose="query"))
    assert embedder.spec.name == f"{small_model}#auto" and embedder.spec.identity.startswith("local:")
    assert embedder.runs_on.startswith("bulk: cpu ") and ", query: cpu " in embedder.runs_on
    with pytest.raises(EmbeddingError, match="unknown embedding purpose 'search'; valid: bulk, query"):
        embedder.embed(texts, purpose="search")


def test_on_a_gpu_pytorch_does_both_without_timing(monkeypatch, var_dir):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    chosen = AutoEmbedder("all-MiniLM-L6-v2#auto", device="auto").choice
    assert (chosen.bulk, chosen.query, chosen.bulk_per_second) == ("torch", "torch", {})
    assert not choice_file().exists()


def test_the_summary_names_the_choice_and_its_timings():
    chosen = BackendChoice(
        bulk="torch",
        query="onnx",
        agree=True,
        bulk_per_second={"torch": 101.4, "onnx": 39.0},
        query_ms={"torch": 15.1, "onnx": 6.1},
    )
    assert chosen.summary() == (
        "bulk torch (torch 101.4/s, onnx 39.0/s); query onnx (torch 15.1 ms, onnx 6.1 ms); vectors agree"
    )
    assert np.isclose(chosen.bulk_per_second["onnx"], 39.0)
