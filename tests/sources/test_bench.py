import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command


def test_the_chunk_bench_reports_every_file_and_language(tmp_path):
    (tmp_path / "a.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    (tmp_path / "b.md").write_text("# T\n\ntext\n")
    (tmp_path / "c.bin").write_bytes(b"\x00\x01binary")
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "skip.js").write_text("function x() {}\n")
    out = StringIO()
    call_command("rag_bench", "chunk", str(tmp_path), "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["files"] == 2
    assert report["chunks_by_language"] == {"python": 2, "markdown": 1}
    assert report["bytes"] == len((tmp_path / "a.py").read_bytes()) + len((tmp_path / "b.md").read_bytes())
    assert set(report) >= {"mb_per_s", "files_per_s", "cpu_seconds"}


def test_a_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(CommandError, match="is not a directory"):
        call_command("rag_bench", "chunk", str(tmp_path / "nope"))
