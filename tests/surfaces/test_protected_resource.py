"""An MCP client told by a 401 how to authenticate (issue 43): RFC 9728 protected-resource metadata says a bearer
key in the header and no authorization server, so the MCP Inspector does not start an OAuth flow."""

import json

import pytest
from django.test import Client

from tests.conftest import api_client

pytestmark = pytest.mark.django_db

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}


def mcp_post(client: Client, **headers: str):
    return client.post(
        "/mcp",
        data=json.dumps(INITIALIZE),
        content_type="application/json",
        headers={"Accept": "application/json, text/event-stream", **headers},
    )


def challenge_of(response) -> dict[str, str]:
    scheme, _, params = response["WWW-Authenticate"].partition(" ")
    assert scheme == "Bearer"
    return {name.strip(): value.strip('"') for name, _, value in (p.partition("=") for p in params.split('", '))}


def test_a_401_on_mcp_points_at_metadata_that_names_no_authorization_server(db):
    refused = mcp_post(Client())
    assert refused.status_code == 401
    challenge = challenge_of(refused)
    assert challenge["realm"] == "rag-site" and "error" not in challenge  # no key sent: no error code (RFC 6750)
    assert challenge["resource_metadata"] == "http://testserver/.well-known/oauth-protected-resource"

    metadata = Client().get("/.well-known/oauth-protected-resource")
    assert metadata.status_code == 200 and metadata["Content-Type"] == "application/json"
    document = metadata.json()
    assert document["resource"] == "http://testserver"
    assert document["bearer_methods_supported"] == ["header"]
    assert not document.get("authorization_servers")  # nowhere to get a token: an admin issues keys
    assert Client().get(document["resource_documentation"].removeprefix("http://testserver")).status_code == 200
    assert metadata["Access-Control-Allow-Origin"] == "*"  # browser-based clients read it from another origin


def test_the_metadata_for_the_mcp_path_names_mcp_as_the_resource(db):
    document = Client().get("/.well-known/oauth-protected-resource/mcp").json()
    assert document["resource"] == "http://testserver/mcp" and document["bearer_methods_supported"] == ["header"]


def test_a_refused_key_is_an_invalid_token_with_the_reason(db):
    refused = mcp_post(Client(), Authorization="Bearer rag_deadbeef_not-a-key")
    assert refused.status_code == 401
    challenge = challenge_of(refused)
    assert challenge["error"] == "invalid_token" and challenge["error_description"] == refused.json()["error"]
    assert challenge["resource_metadata"].endswith("/.well-known/oauth-protected-resource")


def test_the_api_says_the_same_on_401_and_a_valid_key_still_gets_in(db):
    refused = Client().post("/api/v1/search", {"query": "x"}, content_type="application/json")
    assert refused.status_code == 401
    assert challenge_of(refused)["resource_metadata"] == "http://testserver/.well-known/oauth-protected-resource"
    assert mcp_post(api_client()).status_code == 200


def test_the_metadata_is_read_only(db):
    assert Client().post("/.well-known/oauth-protected-resource").status_code == 405
