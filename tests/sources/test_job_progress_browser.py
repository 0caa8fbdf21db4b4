"""A job's page in headless Chromium: phases, rate and time left while a real job runs, and a warning outcome."""

import os
import re
import time
from pathlib import Path

import pytest

from sources import tasks
from sources.models import IndexJob, JobStatus, WorkspaceRoot
from tests.browser import chromium, csp_violations, needs_chromium, sign_in
from tests.conftest import index_root, running_worker
from tests.tree import tree_make

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True), needs_chromium]
PASSWORD = "a-long-test-password"
# Where the screenshots go (outside the repository); unset: none are taken.
SHOTS = os.environ.get("RAG_TEST_SHOTS", "")


def shot(page, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


@pytest.fixture
def boss(django_user_model):
    return django_user_model.objects.create_superuser("boss", password=PASSWORD)


def test_a_running_jobs_page_names_its_phase_rate_and_time_left_and_an_empty_root_warns(
    live_server, boss, tmp_path, settings
):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    (tmp_path / "empty").mkdir()
    empty = index_root(WorkspaceRoot.objects.create(name="empty", path=str(tmp_path / "empty")))
    tree_make(tmp_path / "big", files=400)
    root = WorkspaceRoot.objects.create(name="big", path=str(tmp_path / "big"))
    with running_worker("progress-page", RAG_EMBED_BATCH_SIZE="8", RAG_INDEX_FLUSH_CHUNKS="64"):
        job, created = tasks.root_reindex_request(root_id=root.pk, trigger="test")  # no ORM once Playwright's loop runs
        assert created
        with chromium(viewport={"width": 1280, "height": 800}) as browser:
            page = browser.new_page()
            blocked = csp_violations(page)
            sign_in(page, live_server.url, "boss", PASSWORD, admin=True)
            page.goto(f"{live_server.url}/admin/sources/indexjob/{job.pk}/change/")
            seen = _watch(page)
            shot(page, "job-page-succeeded")
            page.goto(f"{live_server.url}/admin/sources/indexjob/{empty.pk}/change/")
            shot(page, "job-page-empty-root")
            outcome = page.locator(".job-outcome")
            assert "Nothing to index" in outcome.inner_text()
            assert "status-warning" in (outcome.get_attribute("class") or "")
            assert page.locator("text=every file was read").count() == 0
            page.goto(f"{live_server.url}/admin/sources/workspaceroot/")
            shot(page, "roots-list")
            assert blocked == []
    assert IndexJob.objects.get(pk=job.pk).status == JobStatus.SUCCEEDED
    phases = [phase for phase, _, _ in seen]
    assert "Embedding" in phases or "Reading" in phases, seen
    percents = [percent for _, percent, _ in seen]
    assert percents == sorted(percents), seen  # never backwards
    assert any(re.search(r"\d[\d,.]* (chunks|files)/s", text) for _, _, text in seen), seen
    assert any(re.search(r"about .* left", text) for _, _, text in seen), seen


def _watch(page) -> list[tuple[str, int, str]]:
    """(phase, percent, the live box's text) each time it changed, until the job ended; one screenshot mid-run."""
    seen: list[tuple[str, int, str]] = []
    shot_taken = False
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        box = page.locator(".job-live")
        text = box.inner_text()
        percent = int(page.locator("progress").get_attribute("value") or 0)
        phase = box.get_attribute("data-phase") or ""
        if not seen or seen[-1][:2] != (phase, percent):
            seen.append((phase, percent, text))
        if not shot_taken and 10 <= percent < 90 and "left" in text:
            shot(page, "job-page-running")
            shot_taken = True
        if page.locator(".job-outcome").count():
            break
        page.wait_for_timeout(300)
    if not shot_taken:
        shot(page, "job-page-running")
    return seen
