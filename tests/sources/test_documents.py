"""Documents in a workspace root, indexed by a real job: extracted, searchable, cited by page; bad ones named."""

import json
from pathlib import Path

import pytest

from sources.models import Chunk, IndexedFile, JobStatus, WorkspaceRoot
from tests import documents
from tests.conftest import index_root

pytestmark = pytest.mark.django_db


@pytest.fixture
def library(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    settings.RAG_RATE_LIMIT_PER_MINUTE = 0
    directory = tmp_path / "library"
    directory.mkdir()
    documents.corpus_make(directory)
    (directory / "notes.md").write_text("# Notes\n\nPlain markdown stays as it was.\n")
    (directory / "photo.jpg").write_bytes(b"\xff\xd8\xff")  # no pattern names it: counted, not listed
    # The defaults, as a new root gets them: they include the document formats.
    return WorkspaceRoot.objects.create(name="library", path=str(directory), cooldown_seconds=0)


def post(client, path: str, payload: dict) -> dict:
    response = client.post(path, data=json.dumps(payload), content_type="application/json")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_root_of_documents_indexes_the_good_ones_and_names_each_bad_one_with_its_reason(library):
    job = index_root(library)
    assert job.status == JobStatus.SUCCEEDED, job.message
    indexed = set(IndexedFile.objects.values_list("path", flat=True))
    assert indexed == {*documents.GOOD, "notes.md"}
    reasons = {error["path"]: error["reason"] for error in job.errors}
    assert set(reasons) == set(documents.BAD)
    for name, reason in documents.BAD.items():
        assert reason in reasons[name], reasons[name]
    assert (job.files_changed, job.files_skipped + job.files_failed) == (7, 4)
    assert "1 file not matching the root's patterns" in job.message
    # Each bad file's reason is a problem of the job (shown to those who may see its segment), not in the summary
    # every viewer of the job reads.
    assert "encrypted PDF" not in job.message and "no text layer" not in job.message
    sheets = Chunk.objects.filter(path="budget.xlsx").values_list("symbol", flat=True)
    assert sorted(sheets) == ["sheet Costs", "sheet Staff"]
    slides = Chunk.objects.filter(path="deck.pptx").order_by("chunk_index")
    assert [c.context_prefix for c in slides] == ["deck.pptx > slide 1 > ## Roadmap", "deck.pptx > slide 2 > ## Risks"]


def test_an_unchanged_document_is_not_extracted_again_and_a_new_parser_version_re_extracts_only_its_files(
    library, monkeypatch
):
    index_root(library)
    again = index_root(library, force=False)
    assert (again.files_changed, again.files_unchanged) == (0, 7)

    from sources.extract import EXTRACTORS, Extractor

    monkeypatch.setitem(EXTRACTORS, ".pdf", Extractor("pdf", "pypdf", 99))  # as if pypdf were upgraded
    upgraded = index_root(library, force=False)
    assert (upgraded.files_changed, upgraded.files_unchanged) == (1, 6)
    assert Chunk.objects.filter(path="report.pdf").count() == 3


def test_a_phrase_on_page_three_is_cited_at_page_three_by_search_and_context(library, key_client):
    index_root(library)
    answer = post(key_client, "/api/v1/search", {"query": documents.PAGE_THREE_PHRASE, "k": 3})
    best = answer["hits"][0]
    assert (best["path"], best["symbol"], best["heading_path"]) == ("report.pdf", "p. 3", "report.pdf > p. 3")
    assert documents.PAGE_THREE_PHRASE in best["content"]

    context = post(key_client, "/api/v1/context", {"query": documents.PAGE_THREE_PHRASE, "budget_tokens": 1000})
    part = next(p for p in context["parts"] if p["kind"] == "file")
    assert (part["path"], part["symbol"]) == ("report.pdf", "p. 3")
    assert documents.PAGE_THREE_PHRASE in part["content"]
    assert "`p. 3`" in context["text"]


def test_an_html_template_is_still_indexed_as_code(library):
    Path(library.path, "base.html").write_text("{% block content %}<div class='x'>{{ title }}</div>{% endblock %}\n")
    index_root(library)
    chunk = Chunk.objects.get(path="base.html")
    assert "{% block content %}" in chunk.content and chunk.symbol != "p. 1"


def test_lines_between_two_cited_ranges_of_a_document_are_never_filled_from_its_raw_bytes(library):
    # The cited lines are lines of the extracted text; the CSV on disk has other lines at those numbers.
    from retrieval.assembly import Span
    from retrieval.context import _gap_reader

    index_root(library)
    state = IndexedFile.objects.get(path="cities.csv")
    document = f"{state.source_id}:cities.csv"
    span = Span(
        document=document, path="cities.csv", start_line=1, end_line=1, content="", score=1.0, root_id=library.pk
    )
    assert _gap_reader({document: state})(span, 2, 3) is None


def test_a_document_over_the_memory_limit_fails_alone_and_the_rest_is_indexed(library, settings):
    # Enough for every good document of the corpus, with room: 64 MB held until ruled PDF tables went through
    # pdfplumber, and then report.pdf passed it with pdfplumber 0.11.10 and pdfminer.six 20260107 (not 0.11.7).
    settings.RAG_EXTRACT_MAX_MEMORY_MB = 192
    Path(library.path, "huge.csv").write_bytes(("a,b\n" + "x,y\n" * 5_000_000).encode())  # 20 MB of rows
    job = index_root(library)
    assert job.status == JobStatus.SUCCEEDED, job.message
    reasons = {error["path"]: error["reason"] for error in job.errors}
    assert reasons["huge.csv"].startswith("extraction ran out of memory (limit 192 MB")
    assert set(IndexedFile.objects.values_list("path", flat=True)) == {*documents.GOOD, "notes.md"}


def test_the_mcp_search_and_context_tools_cite_the_page_too(library, key_client):
    from tests.surfaces.test_mcp import tool_call

    index_root(library)
    found = tool_call(key_client, "search", {"query": documents.PAGE_THREE_PHRASE, "k": 3})
    best = found["structuredContent"]["hits"][0]
    assert (best["path"], best["symbol"], best["heading_path"]) == ("report.pdf", "p. 3", "report.pdf > p. 3")
    context = tool_call(key_client, "get_context", {"query": documents.PAGE_THREE_PHRASE, "budget_tokens": 1000})
    assert "`p. 3`" in context["structuredContent"]["text"]
