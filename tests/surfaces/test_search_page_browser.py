"""The search page in headless Chromium: sign in, then results appear as you type (HTMX)."""

import pytest

from sources import services
from tests.browser import chromium, csp_violations, needs_chromium
from tests.factories import SkillFactory

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True), needs_chromium]


def test_results_update_as_you_type_after_signing_in(live_server, django_user_model):
    from playwright.sync_api import expect

    django_user_model.objects.create_user("reader", password="a-long-test-password")
    body = "# Operations\n\n## Rotating certificates\n\nRenew the TLS certificates with certbot every sixty days.\n"
    services.skill_index(skill_id=SkillFactory(slug="ops", body=body).pk)
    with chromium() as browser:
        page = browser.new_page()
        blocked = csp_violations(page)
        page.goto(live_server.url + "/")
        expect(page.locator("h1")).to_have_text("Sign in")  # the page is behind sign-in
        page.fill("#id_username", "reader")
        page.fill("#id_password", "a-long-test-password")
        page.click("button[type=submit]")
        expect(page.locator(".who")).to_have_text("reader")
        expect(page.locator("#results")).to_contain_text("Searchable now: 1 skill, 0 files and 0 tools")
        page.locator("input[name=q]").press_sequentially("renew tls certificates", delay=20)
        expect(page.locator("#results .hit .path").first).to_contain_text("skill · Rotating certificates")
        # HTMX swapped the fragment and pushed the URL; no full reload happened.
        assert "q=renew%20tls%20certificates" in page.url
        assert page.evaluate("typeof htmx") == "object"
        # htmx's indicator rules come from site.css, not a <style> it injects (the policy would refuse it).
        assert page.locator("style").count() == 1  # the highlighted code's colours, with the response's nonce
        # The indicator fades out over .2s once the request ends: wait for the fade, not a snapshot of it.
        expect(page.locator("#searching")).to_have_css("opacity", "0")
    assert blocked == []


PASSWORD = "a-long-test-password"


@pytest.fixture
def corpus(tmp_path, settings, django_user_model):
    """A person, a skill and a root of code: what the page's tests search."""
    from sources.models import WorkspaceRoot
    from tests.conftest import index_root

    django_user_model.objects.create_user("reader", password=PASSWORD)
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    (tmp_path / "repo").mkdir()
    lines = [f"def refund_step_{n}(invoice):\n    return invoice.total - {n}\n\n" for n in range(40)]
    (tmp_path / "repo" / "billing.py").write_text("".join(lines))
    for n in range(12):
        (tmp_path / "repo" / f"refunds_{n}.md").write_text(f"# Refunds {n}\n\nHow refunds of kind {n} are paid back.\n")
    root = WorkspaceRoot.objects.create(name="repo", path=str(tmp_path / "repo"))
    index_root(root)
    body = "# Operations\n\n## Rotating certificates\n\nRenew the TLS certificates with certbot every sixty days.\n"
    services.skill_index(skill_id=SkillFactory(slug="ops", body=body).pk)
    return root


def test_search_as_you_type_marks_words_opens_the_viewer_and_keeps_filters_in_the_url(live_server, corpus):
    from playwright.sync_api import expect

    from tests.browser import sign_in

    with chromium() as browser:
        page = browser.new_page()
        blocked = csp_violations(page)
        sign_in(page, live_server.url, "reader", PASSWORD)
        expect(page.locator("#results")).to_contain_text("1 skill, 13 files and 0 tools")
        before = page.evaluate("history.length")
        page.locator("#q").press_sequentially("renew certificates", delay=20)
        expect(page.locator("#results .hit mark", has_text="Renew").first).to_be_visible()
        assert page.evaluate("history.length") == before  # typing replaced the URL; it did not stack entries
        assert "q=renew" in page.url
        # The filters are part of the URL: a shared link shows the same search.
        page.select_option("select[name=kind]", "file")
        expect(page.locator("#results")).to_contain_text("No results")  # no file is about certificates
        assert "kind=file" in page.url and "q=renew+certificates" in page.url.replace("%20", "+")
        page.goto(page.url)
        expect(page.locator("select[name=kind]")).to_have_value("file")
        # Show more appends the next page in place.
        page.fill("#q", "refunds paid back")
        page.press("#q", "Enter")
        expect(page.locator("#results .hit")).to_have_count(10)
        first = page.locator("#results .hit .open").first.inner_text()
        page.click("text=Show more results")
        # Appended in place, the first ten unchanged: the other three files (one card per file: 12 notes, billing.py).
        expect(page.locator("#results .hit")).to_have_count(13)
        assert page.locator("#results .hit .open").first.inner_text() == first
        assert page.locator("#results .hit").nth(10).get_attribute("value") == "11"
        # Keyboard: / focuses the box, arrows move through hits, Enter opens the viewer at the cited lines.
        page.fill("#q", "refund_step_30")
        page.press("#q", "Enter")
        expect(page.locator("#results .hit").first).to_contain_text("refund_step_30")  # the new results, not the last
        page.evaluate("document.activeElement.blur()")
        page.keyboard.press("/")
        assert page.evaluate("document.activeElement.id") == "q"
        page.keyboard.press("ArrowDown")
        assert page.evaluate("document.activeElement.className") == "open"
        page.keyboard.press("Enter")
        page.wait_for_url("**/view/file/**")
        marked = page.locator(".viewer .marked")
        expect(marked.first).to_contain_text("refund_step_30")
        assert page.locator("#citation").inner_text().startswith("billing.py:")
    # Typing, filters, a reload, Show more, the keyboard and the viewer: the policy blocked nothing.
    assert blocked == []


def test_the_search_page_and_the_viewer_fit_a_phone_and_pass_axe(live_server, corpus):
    from playwright.sync_api import expect

    from tests.browser import axe_violations, sign_in

    for scheme in ("light", "dark"):
        with chromium(viewport={"width": 390, "height": 844}, color_scheme=scheme) as browser:
            page = browser.new_page()
            blocked = csp_violations(page)
            sign_in(page, live_server.url, "reader", PASSWORD)
            page.locator("#q").press_sequentially("refund invoice total", delay=10)
            expect(page.locator("#results .hit").first).to_be_visible()
            assert page.evaluate("document.documentElement.scrollWidth") <= 390  # no sideways scrolling
            assert page.locator("#results").count() == 1 and page.locator("[aria-live]").count() == 1
            assert axe_violations(page) == [], scheme
            page.locator("#results .hit .open").first.click()
            page.wait_for_url("**/view/file/**")
            assert axe_violations(page) == [], scheme
            assert page.evaluate("document.documentElement.scrollWidth") <= 390
            assert blocked == [], scheme


def test_back_from_the_viewer_shows_the_whole_search_page(live_server, corpus):
    """The search URL answers both the page and the HTMX fragment: Back must never get the fragment from the cache."""
    from urllib.parse import parse_qs, urlsplit

    from playwright.sync_api import expect

    from tests.browser import sign_in

    with chromium() as browser:
        page = browser.new_page()
        blocked = csp_violations(page)
        sign_in(page, live_server.url, "reader", PASSWORD)
        for query in ("refund_step_30", "refunds paid back"):
            page.fill("#q", query)
            page.press("#q", "Enter")  # a settled search: HTMX fetches the fragment and pushes the URL
            page.wait_for_url(lambda url, query=query: parse_qs(urlsplit(url).query).get("q") == [query])
            expect(page.locator("#results .hit").first).to_be_visible()
            page.locator("#results .hit .open").first.click()
            page.wait_for_url("**/view/file/**")
            page.go_back()
            expect(page.locator("#q")).to_have_value(query)  # the search box is there: the whole page came back
            expect(page.locator("#results .hit").first).to_be_visible()
            assert page.evaluate("getComputedStyle(document.body).fontFamily") != "Times New Roman"  # styled
    assert blocked == []


def test_four_digit_line_numbers_and_long_queries_fit_a_phone(live_server, tmp_path, settings, django_user_model):
    from playwright.sync_api import expect

    from sources.models import WorkspaceRoot
    from tests.browser import sign_in
    from tests.conftest import index_root

    django_user_model.objects.create_user("reader", password=PASSWORD)
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    long_line = "    total = " + " + ".join(f"invoice.line_{n}.amount" for n in range(12)) + "\n"
    lines = ["# filler\n"] * 1150 + ["def settle_ledger_quarterly(invoice):\n", long_line] * 3 + ["    return total\n"]
    (tmp_path / "ledger.py").write_text("".join(lines))
    index_root(WorkspaceRoot.objects.create(name="repo", path=str(tmp_path)))
    with chromium(viewport={"width": 390, "height": 844}) as browser:
        page = browser.new_page()
        blocked = csp_violations(page)
        sign_in(page, live_server.url, "reader", PASSWORD)
        page.locator("#q").press_sequentially("settle ledger quarterly", delay=10)
        gutter = page.locator("#results .hit .snippet .linenos").first
        expect(gutter).to_contain_text("115")  # lines 1151 to 1157 hold the function
        # The gutter is as wide as its widest number: the code beside it scrolls, the numbers are never cut.
        assert gutter.evaluate("el => el.scrollWidth <= el.clientWidth")
        # A long unbroken query wraps where the page repeats it: nothing scrolls sideways.
        page.fill("#q", "x" * 300)
        page.press("#q", "Enter")
        expect(page.locator("#results")).to_contain_text("Nothing matches")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert blocked == []


def test_regex_exact_and_symbol_search_on_the_page_open_the_viewer_at_the_line(live_server, corpus):
    from playwright.sync_api import expect

    from tests.browser import sign_in

    with chromium() as browser:
        page = browser.new_page()
        blocked = csp_violations(page)
        sign_in(page, live_server.url, "reader", PASSWORD)
        page.locator("#q").fill(r"re:def refund_step_3\d")
        page.locator("#q").press("Enter")
        expect(page.locator("#results .summary")).to_contain_text("10 matching lines in 1 file")
        expect(page.locator("#results .hit mark").first).to_have_text("def refund_step_30")
        assert page.locator("#results .hit .linenos").first.inner_text().startswith("91\n")  # the file's own lines
        page.locator("#results .hit a.open").first.click()
        page.wait_for_url("**/view/file/**/billing.py#L91")
        expect(page.locator(".viewer .marked").first).to_contain_text("def refund_step_30")  # at the matching line
        page.go_back()
        page.locator("#q").fill('"invoice.total - 7"')
        page.locator("#q").press("Enter")
        expect(page.locator("#results .summary")).to_contain_text("1 matching line in 1 file")
        expect(page.locator("#results .hit mark")).to_have_text("invoice.total - 7")
        page.locator("#q").fill("sym:refund_step_12")
        page.locator("#q").press("Enter")
        expect(page.locator("#results .hit .path code")).to_have_text("refund_step_12")
    assert blocked == []


@pytest.mark.parametrize("width", [1280, 390], ids=["desktop", "phone"])
def test_the_viewer_wraps_prose_and_scrolls_code_sideways(live_server, tmp_path, settings, django_user_model, width):
    """A PDF's sentence is one long line of its extracted text: it was cut off at the viewer's edge (desktop and
    phone). Prose wraps, each wrapped line indented past its line number; code keeps its lines and scrolls."""
    from sources.models import WorkspaceRoot
    from tests.browser import sign_in
    from tests.conftest import index_root

    django_user_model.objects.create_user("reader", password=PASSWORD)
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    sentence = " ".join(["The refund is paid back to the card it came from within ten working days."] * 12)
    (tmp_path / "policy.md").write_text(f"# Refunds\n\n{sentence}\n\nThe end.\n")
    (tmp_path / "ledger.py").write_text("total = " + " + ".join(f"invoice.line_{n}.amount" for n in range(40)) + "\n")
    root = WorkspaceRoot.objects.create(name="repo", path=str(tmp_path))
    index_root(root)
    with chromium(viewport={"width": width, "height": 800}) as browser:
        page = browser.new_page()
        sign_in(page, live_server.url, "reader", PASSWORD)
        page.goto(f"{live_server.url}/view/file/{root.pk}/policy.md")
        viewer = page.locator("#viewer")
        assert viewer.evaluate("el => el.scrollWidth <= el.clientWidth")  # nothing cut off, nothing to scroll
        line = page.locator("#L-3")
        one_line = page.locator("#L-1").bounding_box()["height"]
        assert line.bounding_box()["height"] > 2 * one_line  # the sentence wraps onto several lines
        # The wrapped lines start right of the numbers: the number column stays clear.
        assert line.evaluate(
            """el => {
                const range = document.createRange();
                range.selectNodeContents(el);
                const numbers = el.querySelector(".linenos").getBoundingClientRect().right;
                const top = el.getBoundingClientRect().top;
                const wrapped = Array.from(range.getClientRects()).filter(r => r.width > 0 && r.top > top + 2);
                return wrapped.length > 0 && wrapped.every(r => r.left >= numbers - 1);
            }"""
        )
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        page.goto(f"{live_server.url}/view/file/{root.pk}/ledger.py")
        assert viewer.evaluate("el => el.scrollWidth > el.clientWidth")  # code keeps its line whole: it scrolls
        assert page.locator("#L-1").bounding_box()["height"] < 2 * one_line
        assert page.evaluate("document.documentElement.scrollWidth") <= width  # inside the viewer, not the page
