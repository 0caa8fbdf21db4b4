"""Web processes load the query models at start, so nobody's first search pays for it."""

import pytest

from retrieval import warmup
from retrieval.config import WarmUpConfig
from sources.embedding import embedder_for
from sources.embedding.registry import embedder_loaded

pytestmark = pytest.mark.django_db


def test_warm_up_loads_every_query_model_and_the_tokenizer(settings, tiny_model):
    settings.RAG_RERANK_ENABLED, settings.RAG_RERANK_MODEL = True, tiny_model
    loaded = warmup.warm_up(WarmUpConfig.from_settings())
    assert loaded == [
        "embedding model all-MiniLM-L6-v2#onnx",  # the default backend's, which the first index run creates
        f"tokenizer {settings.RAG_CONTEXT_TOKENIZER}",
        f"cross-encoder {tiny_model}",
    ]
    assert embedder_loaded(provider="local", name="all-MiniLM-L6-v2#onnx")


def test_a_model_that_cannot_load_is_logged_not_raised(settings, caplog):
    settings.RAG_EMBEDDING_MODEL = "/nowhere/no-such-model"
    settings.RAG_RERANK_ENABLED, settings.RAG_RERANK_MODEL = True, "/nowhere/no-such-cross-encoder"
    thread = warmup.warm_up_in_background(WarmUpConfig.from_settings())
    thread.join(timeout=120)
    assert not thread.is_alive()
    assert "embedding model /nowhere/no-such-model not loaded" in caplog.text
    assert "cross-encoder /nowhere/no-such-cross-encoder not loaded" in caplog.text
    assert embedder_for(provider="local", name="all-MiniLM-L6-v2")  # the process is still fine
