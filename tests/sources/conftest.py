"""Fixtures shared by the tests of sources/."""

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def small_model(tmp_path_factory) -> Path:
    """A two-layer BERT with MiniLM's tokenizer, mean pooling and normalisation, saved as sentence-transformers
    saves a model: quick to export."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import BertConfig, BertModel

    from sources.embedding.local import model_path

    torch.manual_seed(0)
    transformer = Transformer(model_path("all-MiniLM-L6-v2"), max_seq_length=64)
    config = BertConfig(
        vocab_size=transformer.auto_model.config.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
    )
    transformer.auto_model = BertModel(config)
    target = tmp_path_factory.mktemp("models") / "small"
    SentenceTransformer(modules=[transformer, Pooling(32, "mean"), Normalize()], device="cpu").save(str(target))
    return target
