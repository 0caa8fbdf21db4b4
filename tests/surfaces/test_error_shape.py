"""Every API error has one JSON shape (issue 43): ``error`` and ``detail`` the message (a non-empty string),
``errors`` the fields at fault, ``data`` what a client can act on; a 405 too, with its Allow header."""

import json

import pytest
from django.test import Client

from tests.conftest import api_client

pytestmark = pytest.mark.django_db


def assert_error_shape(response, status: int) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json", response["Content-Type"]
    body = response.json()
    assert set(body) == {"error", "detail", "errors", "data"}, body
    assert isinstance(body["detail"], str) and body["detail"] and body["detail"] == body["error"]
    assert isinstance(body["errors"], list) and isinstance(body["data"], dict)
    return body


def test_401_403_404_405_and_422_answer_the_same_shape(key_client, manage_client):
    assert_error_shape(Client().get("/api/v1/skills"), 401)
    forbidden = assert_error_shape(key_client.get("/api/v1/roots"), 403)
    assert "sources.view_workspaceroot" in forbidden["detail"]
    assert_error_shape(key_client.get("/api/v1/memories/987654"), 404)
    assert_error_shape(manage_client.post("/api/v1/roots/987654/reindex", content_type="application/json"), 404)
    assert_error_shape(key_client.get("/api/v1/no-such-thing"), 404)
    assert_error_shape(key_client.get("/api/v1/health?x=%00"), 400)
    invalid = assert_error_shape(
        key_client.post("/api/v1/search", json.dumps({"query": "x", "top_k": 3}), content_type="application/json"),
        422,
    )
    # The field list keeps each field's name; the message names it too.
    assert invalid["errors"] == ["top_k: unknown field: not one this request takes (a typo? the schema lists them)"]
    assert "top_k" in invalid["detail"]


def test_a_service_refusal_names_its_field_in_errors_and_data(key_client):
    answer = key_client.post(
        "/api/v1/grep", json.dumps({"pattern": "(?<=x)y", "regex": True}), content_type="application/json"
    )
    body = assert_error_shape(answer, 422)
    assert body["data"]["field"] == "pattern" and body["errors"][0].startswith("pattern: invalid regex")


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [("get", "/api/v1/search", "POST"), ("put", "/api/v1/memories/1", "DELETE, GET, PATCH")],
)
def test_a_method_a_route_does_not_take_is_a_json_405_with_allow(method, path, allowed):
    response = getattr(api_client(), method)(path)
    body = assert_error_shape(response, 405)
    assert response["Allow"] == allowed
    assert method.upper() in body["detail"] and allowed in body["detail"]
