"""X-Request-ID on every response, the request's log line, and the id in the worker's logs of the task it queued."""

import json
import logging

import pytest

from access.keys import api_key_create
from kernel.logs import JsonFormatter
from sources.models import WorkspaceRoot
from tests.conftest import running_worker, wait_for

pytestmark = pytest.mark.django_db


def search(client, **headers):
    return client.post(
        "/api/v1/search", data=json.dumps({"query": "backup"}), content_type="application/json", headers=headers
    )


def test_a_response_carries_a_new_request_id_when_the_client_sent_none(key_client):
    first, second = search(key_client), search(key_client)
    assert first.status_code == 200
    assert len(first["X-Request-ID"]) == 32 and int(first["X-Request-ID"], 16) >= 0
    assert first["X-Request-ID"] != second["X-Request-ID"]


def test_a_sane_incoming_request_id_is_echoed_and_any_other_replaced(key_client):
    assert search(key_client, **{"X-Request-ID": "agent-call-42"})["X-Request-ID"] == "agent-call-42"
    replaced = search(key_client, **{"X-Request-ID": "bad id; with spaces"})["X-Request-ID"]
    assert replaced != "bad id; with spaces" and len(replaced) == 32


def test_refusals_and_pages_carry_a_request_id_too(client):
    assert client.post("/api/v1/search", data="{}", content_type="application/json").status_code == 401
    for response in (
        client.post("/api/v1/search", data="{}", content_type="application/json"),
        client.get("/no-such-page"),
        client.get("/accounts/login/"),
    ):
        assert response["X-Request-ID"]


def test_the_request_line_names_the_id_identity_route_status_and_duration_never_the_key(client, caplog):
    key, raw = api_key_create(name="logged bot")
    caplog.set_level(logging.INFO, logger="rag.requests")
    response = client.post(
        "/api/v1/search",
        data=json.dumps({"query": "backup"}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {raw}", "X-Request-ID": "line-1"},
    )
    assert response.status_code == 200
    (record,) = [r for r in caplog.records if r.name == "rag.requests"]
    line = json.loads(JsonFormatter().format(record))
    assert {k: line[k] for k in ("request_id", "identity", "route", "method", "status")} == {
        "request_id": "line-1",
        "identity": f"API key {key.prefix}",
        "route": "api/v1/search",
        "method": "POST",
        "status": 200,
    }
    assert line["duration_ms"] >= 0
    assert raw not in caplog.text


@pytest.mark.slow
@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_worker_logs_the_task_a_request_queued_with_that_requests_id(manage_client, tmp_path, settings):
    from django.conf import settings as live

    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "README.md").write_text("# Repo\n\nHow to run it.\n")
    root = WorkspaceRoot.objects.create(name="repo", path=str(tmp_path / "repo"))
    with running_worker("json-worker", RAG_LOG_FORMAT="json") as worker:
        response = manage_client.post(
            f"/api/v1/roots/{root.pk}/reindex",
            data="{}",
            content_type="application/json",
            headers={"X-Request-ID": "queued-by-request-7"},
        )
        assert response.status_code == 202 and response["X-Request-ID"] == "queued-by-request-7"
        job_id = response.json()["job"]["id"]
        wait_for(
            lambda: manage_client.get(f"/api/v1/index-jobs/{job_id}").json()["status"] == "succeeded", what="the job"
        )
        log_path = live.VAR_DIR / "json-worker.log"

        def task_lines():
            lines = [json.loads(x) for x in log_path.read_text().splitlines() if x.startswith("{")]
            return [x for x in lines if x.get("request_id") == "queued-by-request-7"]

        # The success line is written after the job's row says succeeded.
        lines = wait_for(task_lines, timeout=10, what="the task's log lines")
        assert worker.poll() is None
    assert all(line["task_name"] == "sources.tasks.root_index_task" and line["task_id"] for line in lines)
    assert any("succeeded" in line["message"] for line in lines)
