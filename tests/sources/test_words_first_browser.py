"""In headless Chromium: a root whose vectors are not there yet is found on the search page by its words."""

import uuid

import pytest

from sources.models import JobStatus, WorkspaceRoot
from tests.browser import chromium, csp_violations, needs_chromium, sign_in
from tests.conftest import index_root
from tests.openai_server import http_error

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True), needs_chromium]

PASSWORD = "a-long-test-password"


def test_a_root_still_waiting_for_its_vectors_is_found_by_its_words_on_the_page(
    live_server, django_user_model, tmp_path, settings, openai_server
):
    from playwright.sync_api import expect

    settings.RAG_LLM_BASE_URL = openai_server.base_url
    settings.RAG_LLM_MAX_RETRIES = 0
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    name = f"embedder-{uuid.uuid4().hex[:8]}"
    openai_server.fail_always(name, http_error(503))  # the embedding endpoint is down: no vector can be made
    (tmp_path / "repo" / "docs").mkdir(parents=True)
    (tmp_path / "repo" / "docs" / "harbour.md").write_text(
        "# Harbour\n\nThe lantern at the harbour glows over the fjord.\n"
    )
    root = WorkspaceRoot.objects.create(
        name="repo", path=str(tmp_path / "repo"), cooldown_seconds=0, embedding_model_name=f"api:{name}@64"
    )
    job = index_root(root)
    assert job.status == JobStatus.FAILED and job.chunks_written == 1, job.message
    django_user_model.objects.create_user("reader", password=PASSWORD)
    with chromium() as browser:
        page = browser.new_page()
        blocked = csp_violations(page)
        sign_in(page, live_server.url, "reader", PASSWORD)
        page.goto(live_server.url + "/?q=lantern+harbour+fjord")
        hit = page.locator("#results .hit").first
        expect(hit).to_contain_text("docs/harbour.md")
        expect(hit.locator(".pending")).to_have_text("words only, embedding")
        expect(page.locator("#results .warning").first).to_contain_text("wait for their vectors")
    assert blocked == []
