"""Issue 24's walk-through in headless Chromium: upload PDFs in the admin, a real worker indexes them, a search on the
page finds the phrase on page 3 cited at p. 3, and the viewer opens at page 3 and copies that citation."""

import pytest

from tests import documents
from tests.browser import chromium, csp_violations, needs_chromium, sign_in
from tests.conftest import running_worker

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
    needs_chromium,
]
PASSWORD = "a-long-test-password"
CITATION = "report.pdf p. 3 (lines 11-12)"  # report.pdf's page 3 is lines 11-12 of its extracted text


@pytest.fixture
def boss(django_user_model):
    return django_user_model.objects.create_superuser("boss", password=PASSWORD)


def test_a_pdf_uploaded_in_the_admin_is_found_on_the_page_and_opens_in_the_viewer_at_page_three(live_server, boss):
    from playwright.sync_api import expect

    files = [
        {"name": "report.pdf", "mimeType": "application/pdf", "buffer": documents.report_pdf()},
        {"name": "cities.csv", "mimeType": "text/csv", "buffer": documents.CSV.encode()},
    ]
    with running_worker("upload-browser"), chromium(permissions=["clipboard-read", "clipboard-write"]) as browser:
        page = browser.new_page()
        blocked = csp_violations(page)
        sign_in(page, live_server.url, "boss", PASSWORD, admin=True)

        # The admin's multiple file input: both files at once, one scope (shared).
        page.goto(f"{live_server.url}/admin/sources/uploadeddocument/add/")
        page.set_input_files("#id_upload", files)
        page.click("input[name=_save]")
        expect(page.locator("#result_list")).to_contain_text("report.pdf")
        expect(page.locator("#result_list")).to_contain_text("cities.csv")
        # The worker indexes them after the upload commits: the list says so once it has (reloaded, as a person would).
        for _ in range(240):
            row = page.locator("#result_list tr", has_text="report.pdf")
            if "Indexed" in row.inner_text():
                break
            page.wait_for_timeout(500)
            page.reload()
        expect(page.locator("#result_list tr", has_text="report.pdf")).to_contain_text("Indexed")

        # The search page: the phrase on page 3 is cited at p. 3.
        page.goto(live_server.url + "/")
        page.locator("#q").press_sequentially(documents.PAGE_THREE_PHRASE, delay=10)
        best = page.locator("#results .hit").first
        expect(best).to_contain_text(CITATION)

        # The viewer opens at page 3: the cited lines are marked and shown, under the page's marker.
        best.locator(".open").click()
        page.wait_for_url("**/view/document/*#L11-L12")
        marked = page.locator(".viewer .marked")
        expect(marked).to_have_count(2)
        expect(marked.last).to_contain_text(documents.PAGE_THREE_PHRASE)
        expect(marked.first).to_be_in_viewport()
        expect(page.locator("#p-3")).to_have_text("p. 3")
        assert page.evaluate(
            "document.getElementById('p-3').compareDocumentPosition(document.getElementById('L-11'))"
            " & Node.DOCUMENT_POSITION_FOLLOWING"
        )
        expect(page.locator(".page-marker")).to_have_count(3)
        expect(page.get_by_role("link", name="Download the original")).to_have_attribute(
            "href", page.url.split("#")[0].replace("/view/", "/download/").removeprefix(live_server.url)
        )

        # "Copy citation" copies the document's citation, by page first, not path:11-12.
        expect(page.locator("#citation")).to_have_text(CITATION)
        page.click("#copy-citation")
        expect(page.locator("#copied")).to_have_text("Copied.")
        assert page.evaluate("navigator.clipboard.readText()") == CITATION
        # A line marked by hand on page 2 cites page 2.
        page.locator("#L-5 .linenos").click()
        expect(page.locator("#citation")).to_have_text("report.pdf p. 2 (lines 5-5)")
    # The admin's upload, the list, the search page and the viewer: the policy blocked nothing.
    assert blocked == []
