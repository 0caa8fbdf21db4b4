"""The search page's cited answer in headless Chromium: it streams above the results, a citation opens the viewer
at its lines, and Stop ends the model's call upstream."""

import pytest

from kernel.llm import process_breaker
from sources.models import WorkspaceRoot
from tests.browser import chromium, csp_violations, needs_chromium, sign_in
from tests.conftest import index_root, wait_for
from tests.openai_server import paced

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True), needs_chromium]

PASSWORD = "a-long-test-password"
QUESTION = "how large may an upload be"


@pytest.fixture
def answering(tmp_path, settings, django_user_model, openai_server):
    django_user_model.objects.create_user("reader", password=PASSWORD)
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "uploads.md").write_text(
        "# Uploads\n\nAn upload may be at most 25 MB.\nLarger files are refused with a clear message.\n"
    )
    index_root(WorkspaceRoot.objects.create(name="ops", path=str(tmp_path / "ops")))
    settings.RAG_SIMILARITY_THRESHOLD_FILE = -1.0
    settings.RAG_LLM_BASE_URL, settings.RAG_LLM_MODEL = openai_server.base_url, "writer"
    process_breaker().close("writer")
    return openai_server


def test_a_streamed_answer_links_its_citation_to_the_viewer_and_stop_cancels_the_model(live_server, answering):
    from playwright.sync_api import expect

    answering.script("writer", paced(0.05, "An upload may be at most 25 MB [1]."))
    with chromium() as browser:
        page = browser.new_page()
        blocked = csp_violations(page)
        sign_in(page, live_server.url, "reader", PASSWORD)
        page.goto(f"{live_server.url}/?q={QUESTION.replace(' ', '+')}")
        expect(page.locator("#results .hit").first).to_be_visible()
        page.click(".answer-start")
        expect(page.locator(".answer-text")).to_have_text("An upload may be at most 25 MB [1].")
        expect(page.locator(".answer-status")).to_have_text("Cites 1 source.")
        expect(page.locator(".answer-stop")).to_be_hidden()
        expect(page.locator("#results .hit").first).to_be_visible()  # the results stay below the answer
        page.click(".answer-text a.cite")
        expect(page.locator("h1")).to_contain_text("uploads.md")
        assert "/view/file/" in page.url and "#L" in page.url

        # Stop: a model that writes slowly is cut off, in the page and upstream.
        answering.script("writer", paced(0.3, "Uploads are capped at 25 MB [1]. " * 20))
        page.goto(f"{live_server.url}/?q={QUESTION.replace(' ', '+')}")
        page.click(".answer-start")
        expect(page.locator(".answer-text")).to_contain_text("Uploads")
        page.click(".answer-stop")
        expect(page.locator(".answer-status")).to_have_text("Stopped.")
        wait_for(lambda: answering.streams_cut == 1, timeout=30, what="the model's stream closed by the server")
        assert answering.streams_finished == 1  # only the first answer ran to its end
    assert blocked == []
