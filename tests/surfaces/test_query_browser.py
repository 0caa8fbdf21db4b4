"""The query language in headless Chromium: a person types ``sym:`` and ``kind:document`` queries into the page and
sees what a bot gets from /api/v1/search for the same text (issue 41, item 3)."""

import json
import urllib.request

import pytest

from access.keys import api_key_create
from sources import uploads
from tests import documents
from tests.browser import chromium, csp_violations, needs_chromium, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True), needs_chromium]

PASSWORD = "a-long-test-password"


@pytest.fixture
def corpus(tmp_path, settings, django_user_model):
    """A person, a root of code and an uploaded PDF, all shared."""
    from sources.models import WorkspaceRoot
    from tests.conftest import index_root

    settings.RAG_RATE_LIMIT_PER_MINUTE = 0
    django_user_model.objects.create_user("reader", password=PASSWORD)
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    settings.RAG_CHUNK_MAX_CHARS = 120
    (tmp_path / "changelist.py").write_text(
        'class ChangeList:\n    """The rows of the list page and the filters beside them."""\n\n'
        "    def get_filters(self, request):\n        return self.filter_specs, self.has_filters\n"
    )
    (tmp_path / "filters.py").write_text("def get_filters(spec):\n    return spec.items\n")
    (tmp_path / "notes.md").write_text(f"# Notes\n\nWhy {documents.PAGE_THREE_PHRASE} matters to the filters.\n")
    root = WorkspaceRoot.objects.create(name="django", path=str(tmp_path))
    index_root(root)
    document = uploads.document_upload(
        uploads.Upload("report.pdf", documents.report_pdf()), max_bytes=50 * 1024 * 1024
    ).document
    uploads.document_index(document_id=document.pk)
    return root


def api_search(base_url: str, key: str, query: str, **fields) -> dict:
    request = urllib.request.Request(
        base_url + "/api/v1/search",
        data=json.dumps({"query": query, **fields}).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def test_sym_and_kind_document_on_the_page_find_what_the_api_finds(live_server, corpus):
    from playwright.sync_api import expect

    _, key = api_key_create(name="browser bot")  # before the browser: its event loop refuses database calls
    with chromium() as browser:
        page = browser.new_page()
        blocked = csp_violations(page)
        sign_in(page, live_server.url, "reader", PASSWORD)
        page.locator("summary", has_text="How to write a query").click()
        expect(page.locator("#query-help")).to_contain_text("kind (skill, file, tool, document, memory)")

        page.locator("#q").press_sequentially("sym:get_filters", delay=20)
        hits = page.locator("#results .hit")
        expect(hits).to_have_count(2)
        expect(hits.locator("code", has_text="get_filters").first).to_be_visible()
        shown = hits.locator("a.open").evaluate_all("links => links.map(a => a.getAttribute('href'))")
        api = api_search(live_server.url, key, "sym:get_filters")
        assert api["form"] == "symbol"
        assert shown == [
            f"/view/file/{corpus.pk}/{hit['path']}#L{hit['start_line']}-L{hit['end_line']}" for hit in api["hits"]
        ]

        query = f"kind:document {documents.PAGE_THREE_PHRASE}"
        page.locator("#q").fill("")
        page.locator("#q").press_sequentially(query, delay=5)
        expect(page.locator("#results .hit .path").first).to_contain_text("document")
        expect(page.locator("#results")).not_to_contain_text("notes.md")  # the root's note is a file, not a document
        documents_shown = page.locator("#results .hit a.open").evaluate_all("links => links.map(a => a.href)")
        api = api_search(live_server.url, key, query, group="file")  # the page shows one card per file
        assert api["hits"] and {hit["source"] for hit in api["hits"]} == {"document"}
        assert len(documents_shown) == len(api["hits"])
        assert all("/view/document/" in link for link in documents_shown)

        page.locator("#q").fill("")
        page.locator("#q").press_sequentially("filters kind:nope", delay=5)
        expect(page.locator("#results [role=alert]")).to_contain_text("valid kinds: skill, file, tool, document")
    assert blocked == []
