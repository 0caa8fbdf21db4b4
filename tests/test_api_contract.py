"""The API keeps its published contract at the edges (issue 22, finding 11).

Booleans are JSON booleans, a body is its schema or nothing, and every
refusal an operation can give is in the OpenAPI document.
"""

import json

import pytest

from sources.models import IndexJob

pytestmark = pytest.mark.django_db


def post(client, path: str, body: str):
    return client.post(path, data=body, content_type="application/json")


@pytest.mark.parametrize(
    ("path", "payload", "field"),
    [
        ("/api/v1/search", {"query": "x", "group": 0}, "group"),
        ("/api/v1/search", {"query": "x", "mmr": 1}, "mmr"),
        ("/api/v1/search", {"query": "x", "rerank": "yes"}, "rerank"),
        ("/api/v1/context", {"query": "x", "budget_tokens": 200, "include_tools": 0}, "include_tools"),
        ("/api/v1/grep", {"pattern": "x", "regex": "true"}, "regex"),
        ("/api/v1/grep", {"pattern": "x", "case_sensitive": 1}, "case_sensitive"),
    ],
)
def test_a_boolean_field_takes_only_true_or_false(key_client, path, payload, field):
    response = post(key_client, path, json.dumps(payload))
    assert response.status_code == 422, response.content
    assert any(message.startswith(f"{field}:") for message in response.json()["errors"]), response.json()


def test_a_boolean_field_still_takes_true_and_false(key_client):
    assert (
        post(key_client, "/api/v1/search", json.dumps({"query": "x", "group": True, "mmr": False})).status_code == 200
    )


@pytest.mark.parametrize("body", ['"AAA"', "[null,null]", "[]", "7", "null", '{"force": 1}', '{"forse": true}'])
def test_a_reindex_body_that_is_not_its_schema_is_refused_and_queues_no_job(manage_client, readme_root, body):
    response = post(manage_client, f"/api/v1/roots/{readme_root.pk}/reindex", body)
    assert response.status_code == 422, response.content
    assert response.json()["error"].startswith("invalid request")
    assert not IndexJob.objects.exists()


@pytest.mark.parametrize("body", ["", "{}", '{"force": true}'])
def test_a_reindex_with_no_body_or_its_schema_queues_a_job(manage_client, readme_root, body):
    response = post(manage_client, f"/api/v1/roots/{readme_root.pk}/reindex", body)
    assert response.status_code == 202, response.content
    assert IndexJob.objects.filter(root=readme_root).count() == 1


def test_every_operation_declares_every_refusal_it_can_give(client):
    schema = client.get("/api/openapi.json").json()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            codes = set(operation["responses"])
            # Every URL: a control character in the path or query string (400), a lost database (503); every
            # operation with parameters or a body can refuse their values (422), one with a body its size (413).
            assert {"400", "503"} <= codes, (method, path, codes)
            if operation.get("parameters") or operation.get("requestBody"):
                assert "422" in codes, (method, path, codes)
            if operation.get("requestBody"):
                assert "413" in codes, (method, path, codes)


def test_the_schema_names_its_server_and_says_what_the_api_is(client):
    """Importers (GPT Actions and the like) need an absolute base URL and a description; /health needs no key."""
    schema = client.get("/api/openapi.json").json()
    assert schema["servers"] == [{"url": "http://testserver"}]  # where the schema was fetched from
    assert "Bearer" in schema["info"]["description"] and "/api/v1/search" in schema["info"]["description"]
    assert {} in schema["paths"]["/api/v1/health"]["get"]["security"]  # callable without credentials
    assert {} not in schema["paths"]["/api/v1/roots"]["get"]["security"]


@pytest.mark.parametrize("url", ["/api/v1/health?x=%00", "/api/v1/read?root=repo&path=a%01b"])
def test_a_control_character_is_refused_with_a_documented_400(key_client, url):
    response = key_client.get(url)
    assert response.status_code == 400 and "control character" in response.json()["error"]
    path = url.partition("?")[0]
    assert "400" in key_client.get("/api/openapi.json").json()["paths"][path]["get"]["responses"]
