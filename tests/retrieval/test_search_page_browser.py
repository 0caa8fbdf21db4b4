"""The search page in headless Chromium: sign in, then results appear as you type (HTMX)."""

import pytest

from sources import services
from tests.browser import chromium, needs_chromium
from tests.factories import SkillFactory

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True), needs_chromium]


def test_results_update_as_you_type_after_signing_in(live_server, django_user_model):
    from playwright.sync_api import expect

    django_user_model.objects.create_user("reader", password="a-long-test-password")
    body = "# Operations\n\n## Rotating certificates\n\nRenew the TLS certificates with certbot every sixty days.\n"
    services.skill_index(skill_id=SkillFactory(slug="ops", body=body).pk)
    with chromium() as browser:
        page = browser.new_page()
        page.goto(live_server.url + "/")
        expect(page.locator("h1")).to_have_text("Sign in")  # the page is behind sign-in
        page.fill("#id_username", "reader")
        page.fill("#id_password", "a-long-test-password")
        page.click("button[type=submit]")
        expect(page.locator(".who")).to_have_text("reader")
        expect(page.locator("#results")).to_contain_text("1 skill indexed")
        page.locator("input[name=q]").press_sequentially("renew tls certificates", delay=20)
        expect(page.locator("#results .hit .path").first).to_have_text("# Operations > ## Rotating certificates")
        # HTMX swapped the fragment and pushed the URL; no full reload happened.
        assert "q=renew%20tls%20certificates" in page.url
        assert page.evaluate("typeof htmx") == "object"
