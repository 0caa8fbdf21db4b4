"""Results grouped by file on the search page (issue 41), in headless Chromium: dense cards, each file once."""

import os

import pytest

from kernel.llm import process_breaker
from sources.models import WorkspaceRoot
from tests.browser import chromium, csp_violations, needs_chromium, sign_in
from tests.conftest import index_root

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True), needs_chromium]

PASSWORD = "a-long-test-password"
QUERY = "get_queryset"
# What the issue saw on Django's admin: a few files each holding several of the top chunks.
FILES = {"contenttypes/fields.py": 4, "admin/options.py": 3, "admin/views/main.py": 3}
FILES |= {f"views/generic/list_{n}.py": 1 for n in range(6)}


def functions(prefix: str, count: int) -> str:
    return "".join(
        f"def {prefix}_get_queryset_{n}(self, request):\n"
        f'    """Return the queryset for variant {n}: filtered, ordered and limited."""\n'
        f"    queryset = self.model._default_manager.get_queryset()\n"
        f"    queryset = queryset.filter(owner=request.user).order_by('-created')\n"
        f"    return queryset[: self.limit]\n\n\n"
        for n in range(count)
    )


@pytest.fixture
def django_like(tmp_path, settings, django_user_model, openai_server):
    django_user_model.objects.create_user("reader", password=PASSWORD)
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    tree = tmp_path / "django"
    for path, count in FILES.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(functions(path.split("/")[-1].removesuffix(".py"), count))
    index_root(WorkspaceRoot.objects.create(name="django", path=str(tree)))
    # Answers on: the answer box sits above the results.
    settings.RAG_LLM_BASE_URL, settings.RAG_LLM_MODEL = openai_server.base_url, "writer"
    process_breaker().close("writer")


def fully_visible_cards(page) -> int:
    return page.evaluate("""() => Array.from(document.querySelectorAll("#results .hit")).filter(card => {
        const box = card.getBoundingClientRect();
        return box.top >= 0 && box.bottom <= window.innerHeight && box.height > 0;
    }).length""")


def test_one_card_per_file_and_five_fit_a_laptop_screen_with_answers_on(live_server, django_like, tmp_path):
    from playwright.sync_api import expect

    with chromium(viewport={"width": 1280, "height": 800}) as browser:
        page = browser.new_page()
        blocked = csp_violations(page)
        sign_in(page, live_server.url, "reader", PASSWORD)
        page.goto(f"{live_server.url}/?q={QUERY}")
        expect(page.locator("#answer .answer-start")).to_be_visible()
        expect(page.locator("#results .hit").first).to_be_visible()
        if os.environ.get("RAG_TEST_SCREENSHOTS"):
            page.screenshot(path=os.path.join(os.environ["RAG_TEST_SCREENSHOTS"], "grouped.png"))
        paths = page.locator("#results .hit h2").all_inner_texts()
        assert len(paths) == len(set(paths)) == 9  # every file once
        assert paths.count("contenttypes/fields.py") == 1
        fields = page.locator("#results .hit", has_text="contenttypes/fields.py")
        assert fields.locator(".part").count() == 3  # its best chunk and two more, under one path
        assert fields.locator(".part-where a").first.get_attribute("href").startswith("/view/file/")
        assert fully_visible_cards(page) >= 5

        # The toggle: every chunk its own card, as before; the choice is in the URL.
        page.select_option("select[name=group]", "chunk")
        expect(page.locator("#results .hit .card")).to_have_count(0)
        assert "group=chunk" in page.url
        chunks = page.locator("#results .hit h2").all_inner_texts()
        assert chunks.count("contenttypes/fields.py") >= 2
    assert blocked == []
