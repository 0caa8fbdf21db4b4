"""GET /api/v1/health: answers everyone, details only for managers, heartbeats from Redis."""

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from kernel import heartbeats
from tests.conftest import api_client

pytestmark = pytest.mark.django_db

CHECKS = {"database", "broker", "worker", "beat", "embedding_model"}


@pytest.fixture(autouse=True)
def no_heartbeats():
    """Start from no records (a worker of an earlier test may have left one for a minute), and leave none."""
    client = heartbeats.redis_client()

    def clear():
        for key in client.scan_iter(match=f"{heartbeats.PREFIX}*"):
            client.delete(key)

    clear()
    yield
    clear()


def test_anyone_gets_the_summary_without_a_key_even_with_anonymous_search_off(settings):
    settings.RAG_ANONYMOUS_SEARCH = False
    response = Client().get("/api/v1/health")
    assert response.status_code == 200  # the database and the broker answer
    body = response.json()
    assert set(body["checks"]) == CHECKS
    assert all(set(check) == {"ok"} for check in body["checks"].values())  # booleans, nothing else
    assert body["checks"]["database"]["ok"] and body["checks"]["broker"]["ok"]
    assert body["status"] == "degraded"  # no worker, no beat


def test_a_bad_key_is_refused_and_a_key_without_the_manage_permission_gets_the_summary():
    assert Client(headers={"Authorization": "Bearer rag_nope_nope"}).get("/api/v1/health").status_code == 401
    body = api_client().get("/api/v1/health").json()
    assert all(set(check) == {"ok"} for check in body["checks"].values())


def test_a_manager_sees_ages_latencies_and_errors(settings):
    heartbeats.heartbeat_record(heartbeats.WORKER + "w1@host", ttl=heartbeats.WORKER_STALE)
    heartbeats.heartbeat_record(heartbeats.BEAT)
    body = api_client(can_manage=True).get("/api/v1/health").json()
    checks = body["checks"]
    assert body["status"] == "ok" and all(check["ok"] for check in checks.values())
    assert checks["database"]["details"]["latency_ms"] >= 0 and checks["broker"]["details"]["latency_ms"] >= 0
    assert list(checks["worker"]["details"]["workers"]) == ["w1@host"]
    assert 0 <= checks["worker"]["details"]["age_seconds"] < heartbeats.WORKER_STALE
    assert 0 <= checks["beat"]["details"]["age_seconds"] < heartbeats.BEAT_STALE
    assert checks["embedding_model"]["details"]["name"] == settings.RAG_EMBEDDING_MODEL


def test_a_staff_session_with_the_health_permission_sees_what_is_missing_and_why(client, django_user_model, settings):
    settings.RAG_EMBEDDING_MODEL = "/nowhere/model"
    staff = django_user_model.objects.create_user("ops", password="a-long-test-password", is_staff=True)
    client.force_login(staff)
    # Staff status alone shows the summary only (issue 39): the details take access.view_health_details.
    assert all(set(check) == {"ok"} for check in client.get("/api/v1/health").json()["checks"].values())
    staff.user_permissions.add(Permission.objects.get(content_type__app_label="access", codename="view_health_details"))
    body = client.get("/api/v1/health").json()
    checks = body["checks"]
    assert body["status"] == "degraded"
    assert "no worker has reported" in checks["worker"]["details"]["error"]
    assert not checks["beat"]["ok"] and "beat has not published" in checks["beat"]["details"]["error"]
    assert not checks["embedding_model"]["ok"] and checks["embedding_model"]["details"]["loaded_here"] is False


def test_health_is_in_the_openapi_schema():
    schema = Client().get("/api/openapi.json").json()
    assert {"200", "503", "401"} <= set(schema["paths"]["/api/v1/health"]["get"]["responses"])
