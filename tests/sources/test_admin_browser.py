"""The admins' console in headless Chromium: a real job's progress bar moves live; the chunking preview; axe."""

import time

import pytest

from sources import tasks
from sources.models import IndexJob, JobStatus, WorkspaceRoot
from tests.browser import axe_violations, chromium, csp_violations, needs_chromium, sign_in
from tests.conftest import running_worker
from tests.tree import tree_make

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True), needs_chromium]
PASSWORD = "a-long-test-password"


@pytest.fixture
def boss(django_user_model):
    return django_user_model.objects.create_superuser("boss", password=PASSWORD)


def test_a_real_jobs_progress_bar_moves_on_its_page_without_a_reload(live_server, boss, tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    tree_make(tmp_path / "big", files=900)
    root = WorkspaceRoot.objects.create(name="big", path=str(tmp_path / "big"))
    # Small batches: the job beats (and saves its counters) every 2 s while it embeds.
    with running_worker("admin-live", RAG_EMBED_BATCH_SIZE="16", RAG_INDEX_FLUSH_CHUNKS="64"):
        job, created = tasks.root_reindex_request(root_id=root.pk, trigger="test")  # no ORM once Playwright's loop runs
        assert created
        with chromium() as browser:
            _watch_progress(browser, live_server.url, job.pk)
    assert IndexJob.objects.get(pk=job.pk).status == JobStatus.SUCCEEDED


def _watch_progress(browser, base_url: str, job_id: int) -> None:
    page = browser.new_page()
    blocked = csp_violations(page)
    sign_in(page, base_url, "boss", PASSWORD, admin=True)
    page.goto(f"{base_url}/admin/sources/indexjob/{job_id}/change/")
    page.evaluate("window.loadedOnce = true")  # gone if the page reloads
    seen = []
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        value = int(page.locator("progress").get_attribute("value"))
        if not seen or value != seen[-1]:
            seen.append(value)
        if value == 100:
            break
        page.wait_for_timeout(500)
    assert seen[-1] == 100, seen
    assert len([v for v in seen if 0 < v < 100]) >= 2, seen  # it moved while the job ran
    page.wait_for_selector("text=Succeeded")
    assert page.evaluate("window.loadedOnce") is True  # HTMX swapped the fragment; no reload
    assert page.locator("text=Cancel this job").count() == 0  # finished: nothing to cancel
    assert page.locator("style").count() == 0  # htmx injected no indicator <style> (the policy would refuse it)
    assert blocked == []  # the page, its polling and every swapped fragment: nothing refused by the policy


def test_the_chunking_preview_shows_the_sections_before_saving(live_server, boss):
    with chromium() as browser:
        page = browser.new_page()
        blocked = csp_violations(page)
        sign_in(page, live_server.url, "boss", PASSWORD, admin=True)
        page.goto(f"{live_server.url}/admin/sources/skill/add/")
        page.fill("#id_body", "# Deploy\n\nShip it.\n\n## Roll back\n\nRevert the tag.\n")
        page.click("text=Preview chunking")
        rows = page.locator("#chunk-preview tbody tr")
        rows.first.wait_for()
        assert rows.count() == 2
        assert "# Deploy > ## Roll back" in rows.nth(1).inner_text()
        assert page.url.endswith("/admin/sources/skill/add/")  # nothing saved, same page
        assert blocked == []


def test_the_admin_overview_has_no_serious_accessibility_violations(live_server, boss):
    with chromium() as browser:
        page = browser.new_page()
        blocked = csp_violations(page)
        sign_in(page, live_server.url, "boss", PASSWORD, admin=True)
        page.goto(f"{live_server.url}/admin/overview/")
        assert page.locator("h1").inner_text() == "Index overview"
        page.goto(f"{live_server.url}/admin/try-search/?q=deploy")
        assert page.locator("h1").inner_text() == "Try a search"
        assert blocked == []
        page.goto(f"{live_server.url}/admin/overview/")
        assert axe_violations(page) == []


def test_the_new_api_key_selects_itself_when_clicked_without_an_inline_handler(live_server, boss):
    with chromium() as browser:
        page = browser.new_page()
        blocked = csp_violations(page)
        sign_in(page, live_server.url, "boss", PASSWORD, admin=True)
        page.goto(f"{live_server.url}/admin/access/apikey/add/")
        page.fill("#id_name", "ci bot")
        page.click("[name=_save]")
        key = page.locator("input.api-key")
        key.click()
        assert page.evaluate(
            "(el => el.value.slice(el.selectionStart, el.selectionEnd))", key.element_handle()
        ).startswith("rag_")
        assert blocked == []


def test_the_periodic_task_form_explains_a_crontab_without_an_inline_script(live_server, boss):
    from django_celery_beat.models import CrontabSchedule

    CrontabSchedule.objects.create(minute="0", hour="4")
    with chromium() as browser:
        page = browser.new_page()
        blocked = csp_violations(page)
        sign_in(page, live_server.url, "boss", PASSWORD, admin=True)
        page.goto(f"{live_server.url}/admin/django_celery_beat/periodictask/add/")
        assert not page.locator(".field-crontab_translation").is_visible()
        page.locator("#id_crontab").select_option(index=1)
        assert "Translation: At 04:00" in page.locator(".field-crontab .help").inner_text()
        assert blocked == []


def test_every_admin_list_and_add_page_and_the_api_docs_run_under_the_policy(live_server, boss):
    from django.contrib import admin
    from django.urls import reverse

    # The user's change page has the admin's richest widgets (two-box selectors, date and time pickers).
    pages = ["/admin/", "/api/docs", f"/admin/auth/user/{boss.pk}/change/", f"/admin/auth/user/{boss.pk}/password/"]
    for model in admin.site._registry:
        info = (model._meta.app_label, model._meta.model_name)
        pages += [reverse("admin:{}_{}_changelist".format(*info)), reverse("admin:{}_{}_add".format(*info))]
    with chromium() as browser:
        page = browser.new_page()
        blocked = csp_violations(page)
        sign_in(page, live_server.url, "boss", PASSWORD, admin=True)
        for url in pages:
            page.goto(live_server.url + url)
            page.wait_for_load_state("networkidle")  # Swagger UI and the admin's widgets finish building the page
        assert blocked == []


def test_the_roots_list_fits_1280_pixels_with_its_reindex_buttons(live_server, boss, tmp_path):
    """The filter sidebar and eight columns pushed Re-index off a 1280 px screen, and a long path widened the list."""
    deep = tmp_path / "a_rather_long_directory_name" / "with_more_levels_below_it" / "and_another_one" / "repository"
    deep.mkdir(parents=True)
    WorkspaceRoot.objects.create(name="deep", path=str(deep))
    with chromium(viewport={"width": 1280, "height": 800}) as browser:
        page = browser.new_page()
        sign_in(page, live_server.url, "boss", PASSWORD, admin=True)
        page.goto(f"{live_server.url}/admin/sources/workspaceroot/")
        button = page.get_by_role("button", name="Re-index deep").bounding_box()
        shown = page.locator("#changelist .results").bounding_box()  # the list scrolls sideways inside this box
        assert button is not None and shown is not None
        assert button["x"] + button["width"] <= min(1280, shown["x"] + shown["width"]), (button, shown)
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280


def test_the_segment_table_fits_the_root_page_at_1280_pixels(live_server, boss, tmp_path):
    from sources.models import Segment

    (tmp_path / "repo").mkdir()
    root = WorkspaceRoot.objects.create(name="repo", path=str(tmp_path / "repo"))
    Segment.objects.create(root=root, name="docs", path_glob="docs/**", channels="support ops")
    with chromium(viewport={"width": 1280, "height": 800}) as browser:
        page = browser.new_page()
        sign_in(page, live_server.url, "boss", PASSWORD, admin=True)
        page.goto(f"{live_server.url}/admin/sources/workspaceroot/{root.pk}/change/")
        table = page.locator(".inline-group .tabular").first
        sizes = table.evaluate("element => [element.scrollWidth, element.clientWidth]")
        assert sizes[0] <= sizes[1], sizes  # no sideways scroll to reach a segment's channels
