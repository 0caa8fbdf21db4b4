import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command


@pytest.mark.unit
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


@pytest.mark.unit
def test_a_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(CommandError, match="is not a directory"):
        call_command("rag_bench", "chunk", str(tmp_path / "nope"))


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)  # the bench's web server reads the corpus from its own connection
def test_the_search_bench_measures_every_mode_over_http():
    out = StringIO()
    call_command(
        "rag_bench",
        "search",
        "--chunks",
        "2000",
        "--clients",
        "1",
        "--seconds",
        "1",
        "--json",
        "--embedded",
        "64",
        "--yes",
        stdout=out,
        stderr=StringIO(),
    )
    report = json.loads(out.getvalue())
    assert report["chunks"] == 2000
    assert report["corpus"]["built"] is True
    for mode in ("hybrid", "lexical", "vector"):
        result = report["results"][mode]["1"]
        assert result["errors"] == 0, result.get("error_examples")
        assert result["requests"] > 0
        for key in ("p50_ms", "p95_ms", "p99_ms", "max_ms", "qps"):
            assert isinstance(result[key], float) and result[key] >= 0
        assert isinstance(result["stages_ms"]["client"], float)
    for measure in ("hnsw_recall_at_10", "lexical_agreement_at_10"):
        accuracy = report["accuracy"][measure]
        assert accuracy["queries"] > 0 and 0.0 <= accuracy["mean"] <= 1.0
    # The corpus is visible to the bench's bot only; the bench's key is gone.
    from access.models import ApiKey
    from sources.models import Source

    assert Source.objects.get(key="bench:2000").bot_id == "rag-bench"
    assert not ApiKey.objects.exists()


@pytest.mark.django_db
def test_the_search_bench_asks_before_writing_to_a_database_it_does_not_own():
    with pytest.raises(CommandError, match="Pass --yes"):
        call_command("rag_bench", "search", "--chunks", "10")


@pytest.mark.unit
def test_the_extract_bench_reports_pdf_pages_per_second_and_the_peak_memory(tmp_path):
    from tests.documents import corpus_make

    corpus_make(tmp_path)
    out = StringIO()
    call_command("rag_bench", "extract", str(tmp_path), "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["files"] == 10 and report["pdf_pages"] == 3  # the good PDF; the other three are refused
    assert sum(report["refused"].values()) == 4 and report["extracted_by_kind"]["pdf"] == 1
    assert report["pdf_pages_per_s"] > 0 and report["peak_child_rss_mb"] > 0


class _SlowEmbedder:
    def embed(self, texts: list[str], **_: object) -> list[str]:
        if not texts:
            raise ValueError("nothing to embed")
        return texts


@pytest.mark.unit
def test_the_index_bench_adds_up_the_time_inside_embed_and_puts_the_method_back():
    from measure.bench_index import EmbedTimer

    embedder = _SlowEmbedder()
    with EmbedTimer(embedder) as timer:
        assert embedder.embed(["a"]) == ["a"]
        with pytest.raises(ValueError):
            embedder.embed([])  # a failing call is timed too, and its error goes through
    assert timer.seconds > 0
    assert "embed" not in vars(embedder)  # the class's own method again
    assert embedder.embed(["b"]) == ["b"]
