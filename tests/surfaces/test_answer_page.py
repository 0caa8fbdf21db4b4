"""The search page's answer box: offered above the results when a chat model is configured, explained when not."""

import pytest

from sources import services
from tests.factories import SkillFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def skill(db):
    body = "# Operations\n\n## Rotating certificates\n\nRenew the TLS certificates with certbot every 60 days.\n"
    services.skill_index(skill_id=SkillFactory(slug="ops", body=body).pk)


def test_with_a_chat_model_the_page_offers_an_answer_above_the_results(skill, person, client, settings, openai_server):
    settings.RAG_LLM_BASE_URL, settings.RAG_LLM_MODEL = openai_server.base_url, "writer"
    html = client.get("/?q=renew+certificates&kind=skill").content.decode()
    assert 'id="answer"' in html and "Answer with citations" in html
    assert 'data-url="/api/v1/answer"' in html and 'data-sources="skill"' in html
    assert html.index('id="answer"') < html.index('class="hits"')
    assert "js/answer.js" in html


def test_without_a_chat_model_the_page_tells_staff_how_to_turn_answers_on(skill, person, client, settings):
    settings.RAG_LLM_BASE_URL, settings.RAG_LLM_MODEL = "", ""
    html = client.get("/?q=renew+certificates").content.decode()
    # Someone who cannot set it would read a setting's name as noise: no answer box, no hint, the results as ever.
    assert 'id="answer"' not in html and "Cited answers are off" not in html and "RAG_LLM_MODEL" not in html
    assert 'class="hits"' in html
    person.is_staff = True
    person.save(update_fields=["is_staff"])
    staff_html = client.get("/?q=renew+certificates").content.decode()
    assert "Cited answers are off" in staff_html and "RAG_LLM_MODEL" in staff_html


def test_a_symbol_or_grep_search_offers_no_answer_and_does_not_say_answers_are_off(skill, person, client, settings):
    """sym:, re: and "exact text" list definitions and lines: with a chat model configured a staff member was told
    "Cited answers are off" there."""
    person.is_staff = True
    person.save(update_fields=["is_staff"])
    for model in ("writer", ""):
        settings.RAG_LLM_BASE_URL, settings.RAG_LLM_MODEL = ("http://127.0.0.1:9/v1", model) if model else ("", "")
        for query in ("sym:renew", "re:renew\\w+", '"certbot every"'):
            html = client.get("/", {"q": query}).content.decode()
            assert 'id="answer"' not in html and "Cited answers are off" not in html, (model, query)
