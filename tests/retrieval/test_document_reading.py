"""Documents read back as they were cited: read, grep, the viewer and the download of the original."""

import json
import shutil
from pathlib import Path

import pytest

from sources.models import WorkspaceRoot
from tests import documents
from tests.conftest import index_root
from tests.surfaces.test_mcp import tool_call

pytestmark = pytest.mark.django_db

PAGE_THREE_LINE = 11  # report.pdf's extracted text: page 3 starts at line 11 with its heading (see the first test)
PHRASE_LINE = 12  # and the phrase is on the next line


@pytest.fixture
def library(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    settings.RAG_RATE_LIMIT_PER_MINUTE = 0
    directory = tmp_path / "library"
    directory.mkdir()
    (directory / "report.pdf").write_bytes(documents.report_pdf())
    (directory / "notes.md").write_text("# Notes\n\nPlain markdown stays as it was.\n")
    root = WorkspaceRoot.objects.create(name="library", path=str(directory), cooldown_seconds=0)
    index_root(root)
    return root


@pytest.fixture
def private(tmp_path, library):
    directory = tmp_path / "private"
    directory.mkdir()
    shutil.copy(Path(library.path) / "report.pdf", directory / "report.pdf")
    root = WorkspaceRoot.objects.create(name="private", path=str(directory), cooldown_seconds=0, bot_id="alpha")
    index_root(root)
    return root


def post(client, path: str, payload: dict) -> dict:
    response = client.post(path, data=json.dumps(payload), content_type="application/json")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_document_hit_and_its_context_are_cited_by_page_and_lines_while_a_text_file_keeps_path_and_lines(
    library, key_client
):
    best = post(key_client, "/api/v1/search", {"query": documents.PAGE_THREE_PHRASE, "k": 3})["hits"][0]
    assert best["path"] == "report.pdf"
    assert best["citation"] == f"report.pdf p. 3 (lines {best['start_line']}-{best['end_line']})"
    assert best["start_line"] == PAGE_THREE_LINE

    context = post(key_client, "/api/v1/context", {"query": documents.PAGE_THREE_PHRASE, "budget_tokens": 1000})
    part = next(p for p in context["parts"] if p["path"] == "report.pdf")
    assert part["citation"].startswith("report.pdf p. 3 (lines ")
    assert f"[{part['citation']}]" in context["text"] and "report.pdf:" not in context["text"]

    notes = post(key_client, "/api/v1/search", {"query": "plain markdown stays", "k": 3})["hits"][0]
    assert notes["citation"] == f"notes.md:{notes['start_line']}-{notes['end_line']}"


def test_the_search_page_cites_a_document_hit_by_page_and_opens_the_viewer_at_its_lines(person, client, library):
    page = client.get("/", {"q": documents.PAGE_THREE_PHRASE}).content.decode()
    assert f"report.pdf p. 3 (lines {PAGE_THREE_LINE}-{PHRASE_LINE})" in page
    assert f'/view/file/{library.pk}/report.pdf#L{PAGE_THREE_LINE}-L{PHRASE_LINE}"' in page


def test_read_serves_the_extracted_text_with_its_pages_never_the_raw_pdf(library, key_client):
    response = key_client.get("/api/v1/read", {"root": "library", "path": "report.pdf"})
    assert response.status_code == 200, response.content
    out = response.json()
    assert "%PDF" not in out["content"] and "obj" not in out["content"]
    lines = out["content"].split("\n")
    assert lines[PAGE_THREE_LINE - 1] == "Wildlife notes" and documents.PAGE_THREE_PHRASE in lines[PHRASE_LINE - 1]
    assert [p["label"] for p in out["pages"]] == ["p. 1", "p. 2", "p. 3"]
    assert out["pages"][2]["start_line"] == PAGE_THREE_LINE
    assert out["citation"] == f"report.pdf p. 1-3 (lines 1-{out['total_lines']})"
    assert not out["stale"]

    page_three = key_client.get(
        "/api/v1/read", {"root": "library", "path": "report.pdf", "start": PHRASE_LINE, "end": PHRASE_LINE}
    ).json()
    assert page_three["citation"] == f"report.pdf p. 3 (lines {PHRASE_LINE}-{PHRASE_LINE})"
    assert documents.PAGE_THREE_PHRASE in page_three["content"]


def test_grep_finds_a_phrase_in_a_document_at_the_line_and_page_its_chunk_cites(library, key_client):
    out = post(key_client, "/api/v1/grep", {"pattern": documents.PAGE_THREE_PHRASE})
    (match,) = out["matches"]
    assert (match["path"], match["line"], match["page"]) == ("report.pdf", PHRASE_LINE, "p. 3")
    assert match["citation"] == f"report.pdf p. 3 (lines {PHRASE_LINE}-{PHRASE_LINE})"
    assert post(key_client, "/api/v1/grep", {"pattern": "endobj"})["matches"] == []  # no raw PDF syntax


def test_the_mcp_read_range_and_grep_tools_serve_the_extracted_text_with_pages(library, key_client):
    read = tool_call(key_client, "read_range", {"root": "library", "path": "report.pdf", "start": 1, "end": 20})
    assert "%PDF" not in read["content"][0]["text"]
    assert documents.PAGE_THREE_PHRASE in read["structuredContent"]["content"]
    assert f"p. 3 from line {PAGE_THREE_LINE}" in read["content"][0]["text"]
    found = tool_call(key_client, "grep", {"pattern": documents.PAGE_THREE_PHRASE})
    assert f"report.pdf p. 3 (lines {PHRASE_LINE}-{PHRASE_LINE})" in found["content"][0]["text"]


def test_the_viewer_shows_a_document_as_extracted_text_with_page_markers_and_a_download_link(person, client, library):
    page = client.get(f"/view/file/{library.pk}/report.pdf").content.decode()
    assert "%PDF" not in page and documents.PAGE_THREE_PHRASE in page
    assert 'id="p-3"' in page and f'<span id="L-{PAGE_THREE_LINE}">' in page
    assert page.index('id="p-3"') < page.index(f'<span id="L-{PAGE_THREE_LINE}">')  # the marker heads its page
    assert page.count('class="page-marker"') == 3
    assert f'href="/download/file/{library.pk}/report.pdf"' in page


def test_the_original_document_downloads_as_an_attachment_that_no_browser_renders(person, client, library):
    response = client.get(f"/download/file/{library.pk}/report.pdf")
    assert response.status_code == 200
    assert b"".join(response.streaming_content if response.streaming else [response.content]) == (
        documents.report_pdf()
    )
    assert response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"].startswith("attachment;") and "report.pdf" in response["Content-Disposition"]
    assert response["X-Content-Type-Options"] == "nosniff"


def test_a_download_outside_the_persons_scope_is_not_found_like_a_missing_file(person, client, private):
    hidden = client.get(f"/download/file/{private.pk}/report.pdf")
    missing = client.get(f"/download/file/{private.pk}/nowhere.pdf")
    assert hidden.status_code == missing.status_code == 404
    assert b"%PDF" not in hidden.content


def test_a_download_needs_a_signed_in_person_and_serves_documents_only(client, library, django_user_model):
    assert client.get(f"/download/file/{library.pk}/report.pdf").status_code == 302
    client.force_login(django_user_model.objects.create_user("reader", password="a-long-test-password"))
    assert client.get(f"/download/file/{library.pk}/notes.md").status_code == 404


def test_a_document_changed_since_it_was_indexed_is_not_offered_for_download(person, client, library):
    Path(library.path, "report.pdf").write_bytes(documents.pdf_make([["A different report"]]))
    assert client.get(f"/download/file/{library.pk}/report.pdf").status_code == 409


def test_a_document_hit_names_its_page_once(person, client, library):
    """The hit's line read "p. 3 · report.pdf › p. 3": the page as the chunk's name and again in its heading path."""
    for group, times in (("chunk", 1), ("file", 0)):  # one card per file: each part names its page beside its lines
        page = client.get("/", {"q": documents.PAGE_THREE_PHRASE, "group": group}).content.decode()
        path_line = page.split('<p class="path">', 1)[1].split("</p>", 1)[0]
        assert path_line.count("p. 3") == times and "report.pdf" not in path_line, path_line
    assert '<p class="part-where"' in page and "p. 3 (lines" in page
