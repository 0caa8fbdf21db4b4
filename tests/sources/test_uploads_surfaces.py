"""An uploaded PDF on every surface: page 3 found and cited at page 3 by the API, /context, /mcp and the page; the
viewer opens it with page markers; the original downloads as an attachment; all within scope only."""

import json

import pytest

from access.models import AccessGrant
from sources import uploads
from sources.models import UploadedDocument
from tests import documents
from tests.conftest import api_client
from tests.surfaces.test_mcp import tool_call

pytestmark = pytest.mark.django_db

PAGE_THREE_LINE, PHRASE_LINE = 11, 12  # report.pdf's extracted text, as tests/retrieval/test_document_reading.py
BETA_PHRASE = "only beta knows the osprey ledger"


def uploaded(name: str, data: bytes, **scope) -> UploadedDocument:
    document = uploads.document_upload(uploads.Upload(name, data), max_bytes=50 * 1024 * 1024, **scope).document
    uploads.document_index(document_id=document.pk)
    return document


@pytest.fixture
def report(settings) -> UploadedDocument:
    settings.RAG_RATE_LIMIT_PER_MINUTE = 0
    return uploaded("report.pdf", documents.report_pdf(), bot_id="alpha")


@pytest.fixture
def beta() -> UploadedDocument:
    pages = [["Beta memo"], ["Nothing here"], ["Ledger", f"In autumn {BETA_PHRASE} again."]]
    return uploaded("memo.pdf", documents.pdf_make(pages), bot_id="beta")


@pytest.fixture
def alpha_person(person) -> object:
    AccessGrant.objects.create(user=person, bot_id="alpha")
    return person


def post(client, path: str, payload: dict) -> dict:
    response = client.post(path, data=json.dumps(payload), content_type="application/json")
    assert response.status_code == 200, response.content
    return response.json()


def test_the_api_search_cites_page_three_of_an_uploaded_pdf(report):
    best = post(api_client(bot_id="alpha"), "/api/v1/search", {"query": documents.PAGE_THREE_PHRASE, "k": 3})["hits"][0]
    assert (best["path"], best["symbol"]) == ("report.pdf", "p. 3")
    assert best["citation"] == f"report.pdf p. 3 (lines {PAGE_THREE_LINE}-{PHRASE_LINE})"


def test_context_cites_page_three_of_an_uploaded_pdf(report):
    context = post(
        api_client(bot_id="alpha"), "/api/v1/context", {"query": documents.PAGE_THREE_PHRASE, "budget_tokens": 1000}
    )
    part = max((p for p in context["parts"] if p["path"] == "report.pdf"), key=lambda p: p["score"])
    assert part["kind"] == "document" and part["symbol"] == "p. 3"
    assert part["citation"] == f"report.pdf p. 3 (lines {PAGE_THREE_LINE}-{PHRASE_LINE})"
    assert documents.PAGE_THREE_PHRASE in part["content"] and f"[{part['citation']}]" in context["text"]


def test_a_context_asked_for_files_only_includes_uploaded_documents_as_evidence(report):
    context = post(
        api_client(bot_id="alpha"),
        "/api/v1/context",
        {"query": documents.PAGE_THREE_PHRASE, "budget_tokens": 1000, "sources": ["file"]},
    )
    assert {p["path"] for p in context["parts"]} == {"report.pdf"}


def test_the_mcp_tools_cite_page_three_of_an_uploaded_pdf(report):
    client = api_client(bot_id="alpha")
    found = tool_call(client, "search", {"query": documents.PAGE_THREE_PHRASE, "k": 3})
    assert (found["structuredContent"]["hits"][0]["path"], found["structuredContent"]["hits"][0]["symbol"]) == (
        "report.pdf",
        "p. 3",
    )
    context = tool_call(client, "get_context", {"query": documents.PAGE_THREE_PHRASE, "budget_tokens": 1000})
    assert f"report.pdf p. 3 (lines {PAGE_THREE_LINE}-{PHRASE_LINE})" in context["structuredContent"]["text"]


def test_the_search_page_cites_page_three_and_links_the_viewer_at_its_lines(alpha_person, client, report):
    page = client.get("/", {"q": documents.PAGE_THREE_PHRASE}).content.decode()
    assert f"report.pdf p. 3 (lines {PAGE_THREE_LINE}-{PHRASE_LINE})" in page
    assert f'href="/view/document/{report.pk}#L{PAGE_THREE_LINE}-L{PHRASE_LINE}"' in page


def test_the_viewer_shows_an_uploaded_pdf_as_extracted_text_with_page_markers(alpha_person, client, report):
    response = client.get(f"/view/document/{report.pk}")
    assert response.status_code == 200, response.content.decode()[-1500:]
    page = response.content.decode()
    assert "%PDF" not in page and documents.PAGE_THREE_PHRASE in page
    assert page.count('class="page-marker"') == 3
    assert page.index('id="p-3"') < page.index(f'<span id="L-{PAGE_THREE_LINE}">')
    assert 'data-cite="report.pdf"' in page
    assert f'href="/download/document/{report.pk}"' in page


def test_the_original_of_an_uploaded_pdf_downloads_as_an_attachment_no_browser_renders(alpha_person, client, report):
    response = client.get(f"/download/document/{report.pk}")
    assert response.status_code == 200
    assert response.content == documents.report_pdf()
    assert response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"].startswith("attachment;") and "report.pdf" in response["Content-Disposition"]
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "no-store" in response["Cache-Control"]


def test_an_uploaded_html_page_downloads_as_opaque_bytes(alpha_person, client):
    document = uploaded("wiki.html", documents.HTML.encode())
    response = client.get(f"/download/document/{document.pk}")
    assert response.status_code == 200 and response["Content-Type"] == "application/octet-stream"


def test_an_upload_scoped_to_bot_beta_is_invisible_to_bot_alpha_everywhere(alpha_person, client, report, beta):
    key = api_client(bot_id="alpha")
    hits = post(key, "/api/v1/search", {"query": BETA_PHRASE, "k": 5})["hits"]
    assert "memo.pdf" not in [hit["path"] for hit in hits]
    context = post(key, "/api/v1/context", {"query": BETA_PHRASE, "budget_tokens": 1000})
    assert "memo.pdf" not in [p["path"] for p in context["parts"]] and BETA_PHRASE not in context["text"]
    mcp = tool_call(key, "search", {"query": BETA_PHRASE, "k": 5})
    assert "memo.pdf" not in [hit["path"] for hit in mcp["structuredContent"]["hits"]]
    assert "memo.pdf" not in client.get("/", {"q": BETA_PHRASE}).content.decode()

    hidden, missing = client.get(f"/view/document/{beta.pk}"), client.get("/view/document/999999")
    assert hidden.status_code == missing.status_code == 404
    assert BETA_PHRASE not in hidden.content.decode()
    # Worded as for an id that does not exist: nothing tells the document is there.
    assert f"document {beta.pk} not found" in hidden.content.decode()
    assert "document 999999 not found" in missing.content.decode()
    assert client.get(f"/download/document/{beta.pk}").status_code == 404
    assert post(api_client(bot_id="beta"), "/api/v1/search", {"query": BETA_PHRASE, "k": 5})["hits"][0]["path"] == (
        "memo.pdf"
    )


def test_a_disabled_upload_is_not_found_in_the_viewer(alpha_person, client, report):
    UploadedDocument.objects.filter(pk=report.pk).update(enabled=False)
    report.refresh_from_db()
    report.save()  # the source follows the document's enabled flag
    assert client.get(f"/view/document/{report.pk}").status_code == 404
    assert client.get(f"/download/document/{report.pk}").status_code == 404


def test_the_document_viewer_and_download_need_a_signed_in_person(client, report):
    assert client.get(f"/view/document/{report.pk}").status_code == 302
    assert client.get(f"/download/document/{report.pk}").status_code == 302


def test_the_landing_counts_uploaded_documents_and_the_kind_filter_narrows_to_them(alpha_person, client, report, beta):
    landing = client.get("/").content.decode()
    assert "Nothing is indexed yet" not in landing
    assert "Searchable now: 0 skills, 0 files, 1 uploaded document and 0 tools." in landing  # not beta's
    only = client.get("/", {"q": documents.PAGE_THREE_PHRASE, "kind": "document"}).content.decode()
    assert f"report.pdf p. 3 (lines {PAGE_THREE_LINE}-{PHRASE_LINE})" in only
    assert 'value="document" selected' in only
    files = client.get("/", {"q": documents.PAGE_THREE_PHRASE, "kind": "file"}).content.decode()
    assert "report.pdf" not in files
