"""The test plugin (rag_site/testing.py) and `make test-fast`: the inner loop leaves out the slow tests, and every
session reuses one ONNX export instead of building 87 MB again."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rag_site import testing
from sources.embedding.onnx_export import onnx_cache_root

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def fast_marker_expression() -> str:
    recipe = re.search(r"^test-fast:.*\n\t(.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert recipe, "the Makefile has no test-fast recipe"
    expression = re.search(r"""pytest -m (?:"([^"]+)"|(\S+))""", recipe.group(1))
    assert expression, recipe.group(1)
    return expression.group(1) or expression.group(2)


def test_make_test_fast_leaves_out_the_slow_onnx_tests_and_keeps_the_quick_ones():
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        + ["-m", fast_marker_expression(), "tests/sources/test_onnx_backend.py"],
        cwd=ROOT,
        env={**os.environ, "RAG_TEST_SERVERS": "0"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-3000:]
    tests = [line for line in collected.stdout.splitlines() if "::" in line]
    assert any("test_the_export_is_reused_and_a_corrupt_one_is_rebuilt" in test for test in tests), tests
    assert not [test for test in tests if "match_pytorch" in test or "int8_vectors_stay_close" in test], tests


def test_this_sessions_onnx_exports_go_to_the_one_shared_directory():
    var_dir = Path(os.environ["RAG_VAR_DIR"])
    assert (var_dir / "models" / "onnx").is_symlink()
    exports = onnx_cache_root().resolve()  # what the product's export code writes into
    assert exports == testing.onnx_cache_dir().resolve()
    assert not exports.is_relative_to(var_dir.resolve())  # outlives the session's temporary directory


def test_two_sessions_share_one_export(tmp_path):
    shared = tmp_path / "shared"
    assert testing.onnx_cache_share(tmp_path / "one", shared) and testing.onnx_cache_share(tmp_path / "two", shared)
    (tmp_path / "one" / "models" / "onnx" / "export").write_text("built once")
    assert (tmp_path / "two" / "models" / "onnx" / "export").read_text() == "built once"


def test_a_directory_that_cannot_be_made_leaves_the_session_its_own(tmp_path):
    (tmp_path / "a-file").write_text("")
    assert not testing.onnx_cache_share(tmp_path / "var", tmp_path / "a-file" / "cache")
    assert not (tmp_path / "var" / "models" / "onnx").exists()  # exported into the var dir, as the product does
