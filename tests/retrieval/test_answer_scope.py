"""The scope matrix for answers: an answer never gives the model, nor cites, a source its caller may not see."""

import json
import re

import pytest

from kernel.llm import process_breaker
from tests.access.test_access_matrix import QUERY, VISIBLE, caller, markers, sources  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db


@pytest.fixture
def citing_everything(sources, settings, openai_server):  # noqa: F811 - the fixture imported above
    """A model that cites every source it was given, and numbers past them."""
    settings.RAG_LLM_BASE_URL, settings.RAG_LLM_MODEL = openai_server.base_url, "citer"
    process_breaker().close("citer")

    def cite(model: str, body: dict) -> str:
        given = len(re.findall(r"^\[(\d+)\] ", body["messages"][-1]["content"], flags=re.MULTILINE))
        return "The procedure is below " + "".join(f"[{n}]" for n in range(1, given + 6)) + "."

    openai_server.on_chat(cite)
    return openai_server


@pytest.mark.parametrize("identity", list(VISIBLE))
def test_an_answer_cites_only_what_the_identity_may_see(identity, citing_everything, django_user_model):
    client = caller(identity, django_user_model)
    response = client.post(
        "/api/v1/answer",
        data=json.dumps({"query": QUERY, "budget_tokens": 8000, "k": {"skill": 50, "file": 50}}),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    visible = VISIBLE[identity]
    by_number = {s["number"]: s for s in body["sources"]}
    cited = markers(by_number[c["number"]]["content"] + by_number[c["number"]]["citation"] for c in body["citations"])
    assert cited <= visible
    assert body["dropped_markers"] == 5  # the numbers past the sources
    prompt = citing_everything.requests(model="citer")[-1].body["messages"][-1]["content"]
    prompt = prompt.split("\n\nQuestion: ")[0]  # the question itself names every marker
    assert markers([prompt]) <= visible  # the model never read another scope's text
    assert markers([prompt]) & visible  # and it did read this one's
