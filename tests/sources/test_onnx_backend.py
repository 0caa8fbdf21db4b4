"""The ONNX Runtime backend: the same vectors as PyTorch, from an export cached safely on this machine."""

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from sources.embedding import EmbeddingError
from sources.embedding.local import LocalEmbedder, local_model_name
from sources.embedding.onnx_export import MANIFEST_FILE, MODEL_FILE, _publish, file_sha256, onnx_model_file

pytestmark = pytest.mark.unit


def varied_texts() -> list[str]:
    """A few hundred texts: prose, code, one word, empty, padded, non-Latin, and many past 256 word pieces."""
    rng = random.Random(7)
    words = Path(__file__).read_text().split() + Path(np.__file__).read_text().split()
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 350))) for _ in range(250)]
    code = "def handler(request, *args):\n    if not request.user.is_staff:\n        raise PermissionDenied\n"
    return [
        *texts,
        "",
        "   padded with spaces   ",
        "Straße, café, naïve: ünïcödé and 漢字テスト and emoji 🚀",
        "how do I register a model admin",
        code * 40,  # far past max_seq_length
        "x" * 5000,
    ]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1)


@pytest.fixture(scope="module")
def torch_vectors() -> dict[bool, np.ndarray]:
    reference = LocalEmbedder("all-MiniLM-L6-v2")
    return {pieces: reference.embed(varied_texts(), pieces=pieces) for pieces in (False, True)}


@pytest.mark.slow
@pytest.mark.parametrize("pieces", [False, True], ids=["truncated", "pieces"])
def test_onnx_vectors_match_pytorch_on_varied_texts(torch_vectors, pieces):
    vectors = LocalEmbedder("all-MiniLM-L6-v2#onnx").embed(varied_texts(), pieces=pieces)
    assert vectors.shape == torch_vectors[pieces].shape and vectors.dtype == np.float32
    assert cosines(vectors, torch_vectors[pieces]).min() >= 0.999


@pytest.mark.slow
def test_int8_vectors_stay_close_to_pytorch(torch_vectors):
    vectors = LocalEmbedder("all-MiniLM-L6-v2#onnx-int8").embed(varied_texts())
    similarity = cosines(vectors, torch_vectors[False])
    assert similarity.min() >= 0.95 and similarity.mean() >= 0.98


def test_a_small_model_runs_the_same_on_both_backends(small_model):
    texts = ["one", "two words", "a much longer text " * 30]
    expected = LocalEmbedder(str(small_model)).embed(texts)
    assert cosines(LocalEmbedder(f"{small_model}#onnx").embed(texts), expected).min() >= 0.999


def test_the_export_is_reused_and_a_corrupt_one_is_rebuilt(small_model, tmp_path):
    first = onnx_model_file(small_model, "onnx", cache_root=tmp_path)
    stamp = first.stat().st_mtime_ns
    assert onnx_model_file(small_model, "onnx", cache_root=tmp_path) == first and first.stat().st_mtime_ns == stamp
    first.write_bytes(first.read_bytes()[:1000])  # a torn copy
    again = onnx_model_file(small_model, "onnx", cache_root=tmp_path)
    assert (
        again == first and file_sha256(again) == json.loads((again.parent / MANIFEST_FILE).read_text())["model_sha256"]
    )
    assert [p.name for p in tmp_path.iterdir()] == [first.parent.name]  # no temporary or broken leftovers


def test_changed_weights_get_a_new_export_and_the_old_one_is_never_read(small_model, tmp_path):
    changed = tmp_path / "changed"
    shutil.copytree(small_model, changed)
    before = onnx_model_file(changed, "onnx", cache_root=tmp_path / "cache")
    weights = changed / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    after = onnx_model_file(changed, "onnx", cache_root=tmp_path / "cache")
    assert after != before and after.exists()


def test_int8_is_quantised_from_the_cached_fp32_export(small_model, tmp_path):
    int8 = onnx_model_file(small_model, "onnx-int8", cache_root=tmp_path)
    fp32 = onnx_model_file(small_model, "onnx", cache_root=tmp_path)
    assert int8.parent != fp32.parent and int8.stat().st_size < fp32.stat().st_size


def export_dir(root: Path, name: str, content: bytes) -> Path:
    work = root / name
    work.mkdir()
    (work / MODEL_FILE).write_bytes(content)
    (work / MANIFEST_FILE).write_text(json.dumps({"model_sha256": file_sha256(work / MODEL_FILE)}))
    return work


def test_a_second_exporter_keeps_the_first_ones_whole_export(tmp_path):
    target = tmp_path / "onnx-key"
    _publish(export_dir(tmp_path, ".export-a", b"first"), target)
    _publish(export_dir(tmp_path, ".export-b", b"second"), target)
    assert (target / MODEL_FILE).read_bytes() == b"first"


def test_an_exporter_replaces_a_broken_export_whole(tmp_path):
    target = export_dir(tmp_path, "onnx-key", b"whole")
    (target / MODEL_FILE).write_bytes(b"torn")
    _publish(export_dir(tmp_path, ".export-a", b"rebuilt"), target)
    assert (target / MODEL_FILE).read_bytes() == b"rebuilt"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["onnx-key"]


@pytest.fixture
def cls_pooled(small_model, tmp_path) -> Path:
    """The small model pooled by its first token, which the ONNX backend does not do."""
    target = tmp_path / "cls"
    shutil.copytree(small_model, target)
    pooling = target / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    config["pooling_mode"] = "cls"
    pooling.write_text(json.dumps(config))
    return target


def test_a_model_named_for_onnx_and_pooled_otherwise_is_refused_naming_pytorch(cls_pooled):
    with pytest.raises(EmbeddingError, match="pools by cls: run it on PyTorch"):
        LocalEmbedder(f"{cls_pooled}#onnx").embed(["text"])


def test_the_onnx_setting_leaves_a_model_onnx_cannot_run_on_torch(small_model, cls_pooled):
    # The setting prefers ONNX for every local model; a model it cannot run keeps working on torch.
    assert local_model_name(str(small_model), "onnx") == f"{small_model}#onnx"
    assert local_model_name("all-MiniLM-L6-v2", "onnx-int8") == "all-MiniLM-L6-v2#onnx-int8"
    assert local_model_name(str(cls_pooled), "onnx") == str(cls_pooled)
    assert local_model_name("sentence-transformers/not-saved-here", "onnx") == "sentence-transformers/not-saved-here"
    assert local_model_name(str(small_model), "torch") == str(small_model)
    # A name that states its backend gets it, whatever the setting says.
    assert local_model_name(f"{cls_pooled}#onnx", "torch") == f"{cls_pooled}#onnx"
    assert local_model_name(f"{small_model}#torch", "onnx") == str(small_model)


def test_a_model_whose_configuration_is_malformed_is_named_in_a_clear_error(small_model, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(small_model, broken)
    (broken / "modules.json").write_text("{not json")
    with pytest.raises(EmbeddingError, match="modules.json is not valid JSON"):
        local_model_name(str(broken), "onnx")


def test_a_missing_model_fails_with_a_message_and_downloads_nothing():
    with pytest.raises(EmbeddingError, match="neither the bundled model nor a directory"):
        LocalEmbedder("sentence-transformers/not-here#onnx").embed(["text"])
