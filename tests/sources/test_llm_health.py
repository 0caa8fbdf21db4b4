"""The language model's circuit breaker in GET /api/v1/health and on the admin's index overview."""

import uuid

import pytest
from django.test import Client

from kernel.llm import process_breaker
from tests.conftest import api_client

pytestmark = pytest.mark.django_db


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def chain(settings):
    """A configured chain of two models nobody else uses; nothing is ever called (the breaker is read only)."""
    primary, backup = unique("primary"), unique("backup")
    settings.RAG_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    settings.RAG_LLM_MODEL = primary
    settings.RAG_LLM_FALLBACK_MODELS = [backup]
    yield primary, backup
    for model in (primary, backup):
        process_breaker().close(model)


def test_no_llm_check_without_a_configured_language_model(settings):
    settings.RAG_LLM_BASE_URL = ""
    assert "llm" not in Client().get("/api/v1/health").json()["checks"]


def test_the_llm_check_fails_only_when_every_model_of_the_chain_is_open(chain):
    primary, backup = chain
    breaker = process_breaker()
    manager = api_client(can_manage=True)
    body = manager.get("/api/v1/health").json()
    check = body["checks"]["llm"]
    assert check["ok"]
    assert [m["model"] for m in check["details"]["models"]][:2] == [primary, backup]
    assert {m["state"] for m in check["details"]["models"][:2]} == {"closed"}

    breaker.record_error(primary, kind="server", message="HTTP 503 scripted")
    breaker.trip(primary, seconds=300, reason="server: HTTP 503 scripted")
    check = manager.get("/api/v1/health").json()["checks"]["llm"]
    assert check["ok"], "the backup still answers"
    first = check["details"]["models"][0]
    assert first["state"] == "open" and first["opened_until"] > 0 and first["errors"] == {"server": 1}
    assert first["last_error"] == "server: HTTP 503 scripted"

    breaker.trip(backup, seconds=300, reason="timeout: no answer within 60 s")
    response = manager.get("/api/v1/health")
    assert response.status_code == 200  # not critical: search and indexing go on without it
    body = response.json()
    assert body["status"] == "degraded" and not body["checks"]["llm"]["ok"]
    assert primary in body["checks"]["llm"]["details"]["error"] and backup in body["checks"]["llm"]["details"]["error"]
    anonymous = Client().get("/api/v1/health").json()["checks"]["llm"]
    assert anonymous == {"ok": False}  # no details without the manage permission


def test_the_overview_lists_each_models_breaker_errors_and_latency(chain, admin_client):
    primary, backup = chain
    breaker = process_breaker()
    breaker.record_success(backup, latency_seconds=0.120)
    breaker.record_error(primary, kind="rate_limit", message="HTTP 429 slow down")
    breaker.trip(primary, seconds=300, reason="rate_limit: HTTP 429 slow down")
    page = admin_client.get("/admin/overview/").content.decode()
    assert "Language models" in page
    row = page.split(f"<td>{primary}</td>", 1)[1].split("</tr>", 1)[0]
    assert "<strong>open</strong>" in row and "rate_limit 1" in row and "HTTP 429 slow down" in row
    backup_row = page.split(f"<td>{backup}</td>", 1)[1].split("</tr>", 1)[0]
    assert "closed" in backup_row and "120 / 120 ms (1 call)" in backup_row


def test_the_overview_has_no_language_model_section_without_one(settings, admin_client):
    settings.RAG_LLM_BASE_URL = ""
    assert "Language models" not in admin_client.get("/admin/overview/").content.decode()
