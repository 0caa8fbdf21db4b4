"""A memory on a real Celery worker that consumes only the interactive queue: remembered through the API,
indexed there (never behind bulk work), recalled by its bot only."""

import pytest

from tests.conftest import api_client, running_worker, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow]


def test_a_remembered_fact_is_indexed_on_the_interactive_queue_and_recalled_by_its_bot_only(settings):
    settings.RAG_RATE_LIMIT_PER_MINUTE = 0
    alpha = api_client(name="alpha", bot_id="alpha")
    with running_worker("memory-worker", queues="interactive"):
        response = alpha.post(
            "/api/v1/memories", {"text": "The staging database moved to db-2."}, content_type="application/json"
        )
        assert response.status_code == 201 and response.json()["index_status"] == "queued"
        path = f"/api/v1/memories/{response.json()['id']}"
        done = wait_for(
            lambda: alpha.get(path).json()["index_status"] in ("indexed", "failed") and alpha.get(path).json(),
            what="the memory indexed",
        )
    assert done["index_status"] == "indexed", done["last_error"]

    def recalled(client) -> list[str]:
        answer = client.post("/api/v1/memories/recall", {"query": "staging database"}, content_type="application/json")
        return [m["text"] for m in answer.json()["memories"]]

    assert recalled(alpha) == ["The staging database moved to db-2."]
    assert recalled(api_client(name="beta", bot_id="beta")) == []
