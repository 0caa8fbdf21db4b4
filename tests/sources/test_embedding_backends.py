"""A local model's backend is part of its name, so its vectors are a model of their own."""

import pytest

from rag_site.settings_registry import SETTINGS
from sources.embedding import EmbeddingError
from sources.embedding.backends import BACKENDS, local_name, local_name_parse
from sources.embedding.local import model_findable, model_path

pytestmark = pytest.mark.unit


def test_torch_keeps_the_plain_name_and_onnx_backends_are_written_after_it():
    assert local_name("all-MiniLM-L6-v2", "torch") == "all-MiniLM-L6-v2"
    assert local_name("all-MiniLM-L6-v2", "onnx") == "all-MiniLM-L6-v2#onnx"
    assert local_name("/models/minilm", "onnx-int8") == "/models/minilm#onnx-int8"
    assert local_name_parse("all-MiniLM-L6-v2#onnx-int8") == ("all-MiniLM-L6-v2", "onnx-int8")
    assert local_name_parse("all-MiniLM-L6-v2") == ("all-MiniLM-L6-v2", "torch")


def test_a_name_that_states_its_backend_wins_over_the_setting():
    assert local_name("all-MiniLM-L6-v2#onnx", "torch") == "all-MiniLM-L6-v2#onnx"
    assert local_name("all-MiniLM-L6-v2#torch", "onnx-int8") == "all-MiniLM-L6-v2"


def test_a_hash_that_names_no_backend_is_part_of_the_path():
    assert local_name_parse("/models/build#3") == ("/models/build#3", "torch")
    assert local_name("/models/build#3", "onnx") == "/models/build#3#onnx"


def test_an_unknown_backend_names_the_valid_ones():
    with pytest.raises(EmbeddingError, match="unknown embedding backend 'tensorrt'; valid backends: torch, onnx"):
        local_name("all-MiniLM-L6-v2", "tensorrt")


def test_the_setting_offers_exactly_the_backends_the_embedder_runs():
    assert SETTINGS["RAG_EMBEDDING_BACKEND"].choices == BACKENDS


def test_every_backend_of_the_bundled_model_finds_the_same_weights():
    assert model_findable("all-MiniLM-L6-v2#onnx-int8")
    assert model_path("all-MiniLM-L6-v2#onnx") == model_path("all-MiniLM-L6-v2")
