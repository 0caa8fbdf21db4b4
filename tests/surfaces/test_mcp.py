"""/mcp through the SDK's own Streamable HTTP client, on a real (threaded WSGI) server.

Real PostgreSQL, Redis and embedding model; the key is checked, the scope
applied and the rate limit counted exactly as for the HTTP API. The
transport's edges (Origin, paths, bodies, failures) go through Django's test
client, as do the MCP checks of the scope matrix (``tool_call``).
"""

import json
import logging

import anyio
import httpx2
import pytest
from django.http import HttpResponse
from django.test import Client as DjangoClient
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.types import INVALID_PARAMS, INVALID_REQUEST
from ninja import Field, Schema

from access.keys import api_key_create
from sources import services
from sources.models import JobStatus, Skill, WorkspaceRoot
from surfaces.mcp import schema_for_model
from surfaces.mcp_transport import INTERNAL_ERROR
from tests.conftest import api_client, index_root
from tests.factories import SkillFactory

pytestmark = pytest.mark.django_db(transaction=True)

TOOL_NAMES = {
    "search",
    "get_context",
    "search_skills",
    "get_skill",
    "search_tools",
    "read_range",
    "grep",
    "remember",
    "recall",
    "forget",
}
WRITING_TOOLS = {"remember", "forget"}
SHARED_BODY = (
    "---\nname: Deployment guide\n---\n# Deploy\n\nShip it with docker compose.\n\n"
    "## Backups\n\nRun pg_dump every night.\n"
)
ALPHA_BODY = "# Zebrafalcon rotation\n\nRotate the zebrafalcon credentials every quarter.\n"
APP = 'def handle_order(order):\n    """Handle one order."""\n    return order\n\n\nHANDLE_ORDER_LIMIT = 3\n'
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
# What the SDK client sends on every POST after the initialize handshake: a stateless server serves it without one.
PROTOCOL_VERSION = "2025-11-25"


def mcp_post(client: DjangoClient, message: dict | bytes, *, path: str = "/mcp", **headers: str) -> HttpResponse:
    """One JSON-RPC message POSTed through Django's test client, with the headers an MCP client sends."""
    body = message if isinstance(message, bytes) else json.dumps(message)
    return client.post(
        path,
        data=body,
        content_type=MCP_HEADERS["Content-Type"],
        headers={"Accept": MCP_HEADERS["Accept"], "MCP-Protocol-Version": PROTOCOL_VERSION, **headers},
    )


def call_message(name: str, arguments: dict) -> dict:
    """A JSON-RPC ``tools/call`` request."""
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def tool_call(client: DjangoClient, name: str, arguments: dict) -> dict:
    """The result of one ``tools/call`` (``structuredContent``, ``isError``, ``content``) via Django's test client."""
    response = mcp_post(client, call_message(name, arguments))
    assert response.status_code == 200, response.content
    return response.json()["result"]


@pytest.fixture
def skills(settings):
    settings.RAG_RATE_LIMIT_PER_MINUTE = 0
    services.skill_index(skill_id=SkillFactory(slug="deploy", body=SHARED_BODY).pk)
    services.skill_index(skill_id=SkillFactory(slug="zebrafalcon", body=ALPHA_BODY, bot_id="alpha").pk)


@pytest.fixture
def roots(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    for name, bot_id, text in (
        ("shop", "", APP),
        ("alpha", "alpha", "def zebrafalcon_rotate():\n    return 'alpha only'\n"),
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "app.py").write_text(text)
        assert (
            index_root(WorkspaceRoot.objects.create(name=name, path=str(tmp_path / name), bot_id=bot_id)).status
            == JobStatus.SUCCEEDED
        )


def key(**options) -> str:
    return api_key_create(name=options.pop("name", "agent"), **options)[1]


def run(url: str, raw_key: str | None, calls, *, mode: str = "legacy"):
    """``calls(client)`` in an SDK client connected to ``url``; its return value."""
    headers = {"Authorization": f"Bearer {raw_key}"} if raw_key else {}

    async def main():
        # The HTTP client is closed here: the transport leaves a client it was given open.
        async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
            async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
                return await calls(client)

    return anyio.run(main)


def mcp_url(live_server) -> str:
    return live_server.url + "/mcp"


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # legacy: the initialize handshake; auto: 2026-07-28 discover
def test_an_agent_lists_the_tools_and_searches_with_the_sdk_client(live_server, skills, mode):
    async def calls(client: Client):
        listed = await client.list_tools()
        found = await client.call_tool("search", {"query": "nightly database backup", "k": 5})
        skill = await client.call_tool("get_skill", {"slug": "deploy"})
        context = await client.call_tool(
            "get_context", {"query": "how do I back up the database", "budget_tokens": 2000}
        )
        return listed, found, skill, context

    listed, found, skill, context = run(mcp_url(live_server), key(), calls, mode=mode)

    assert {tool.name for tool in listed.tools} == TOOL_NAMES
    for tool in listed.tools:
        assert tool.description and tool.input_schema["type"] == "object" and tool.input_schema["properties"], tool.name
        assert tool.output_schema["type"] == "object", tool.name
        assert tool.annotations.read_only_hint is (tool.name not in WRITING_TOOLS), tool.name
        assert "$ref" not in json.dumps(tool.input_schema), (
            tool.name
        )  # nested models inlined, for models that miss $refs
    assert not found.is_error
    assert found.structured_content["hits"][0]["citation"].startswith("skill:deploy:")
    assert json.loads(found.content[0].text) == found.structured_content
    assert not skill.is_error
    assert skill.structured_content["body"] == SHARED_BODY
    assert skill.structured_content["metadata"] == {"name": "Deployment guide"}
    assert skill.content[0].text == SHARED_BODY
    assert not context.is_error
    assert "[skill:deploy:" in context.structured_content["text"]
    assert context.structured_content["parts"][0]["slug"] == "deploy"
    assert context.content[0].text == context.structured_content["text"]


def test_search_answers_what_the_http_api_answers(live_server, skills):
    raw = key()
    body = {"query": "ship with docker compose", "k": 3, "mode": "lexical"}
    via_mcp = run(mcp_url(live_server), raw, lambda client: client.call_tool("search", body))
    via_api = api_client().post("/api/v1/search", body, content_type="application/json").json()
    assert via_mcp.structured_content == via_api


def test_a_bot_key_sees_its_bot_skill_and_a_plain_key_does_not(live_server, skills):
    async def calls(client: Client):
        found = await client.call_tool("search", {"query": "zebrafalcon credentials", "k": 10})
        skills_found = await client.call_tool("search_skills", {"query": "zebrafalcon credentials"})
        skill = await client.call_tool("get_skill", {"slug": "zebrafalcon"})
        return found, skills_found, skill

    found, skills_found, skill = run(mcp_url(live_server), key(bot_id="alpha"), calls)
    assert "skill:zebrafalcon" in {hit["source_key"] for hit in found.structured_content["hits"]}
    assert "zebrafalcon" in {s["slug"] for s in skills_found.structured_content["skills"]}
    assert not skill.is_error and skill.structured_content["body"] == ALPHA_BODY

    found, skills_found, skill = run(mcp_url(live_server), key(), calls)
    assert "skill:zebrafalcon" not in {hit["source_key"] for hit in found.structured_content["hits"]}
    assert "zebrafalcon" not in {s["slug"] for s in skills_found.structured_content["skills"]}
    assert skill.is_error and skill.structured_content["status"] == 404
    assert skill.content[0].text == "skill 'zebrafalcon' does not exist"


def test_get_skill_does_not_serve_a_disabled_skill(skills):
    skill = Skill.objects.get(slug="deploy")
    skill.enabled = False
    skill.save()
    result = tool_call(api_client(), "get_skill", {"slug": "deploy"})
    assert result["isError"] and result["structuredContent"]["status"] == 404
    assert result["content"][0]["text"] == "skill 'deploy' is disabled: an admin turned it off"


def test_a_grep_citation_is_verified_with_read_range(live_server, skills, roots):
    async def calls(client: Client):
        found = await client.call_tool("grep", {"pattern": "HANDLE_ORDER_LIMIT", "case_sensitive": True})
        match = found.structured_content["matches"][0]
        path, _, lines = match["citation"].rpartition(":")
        start = int(lines.split("-")[0])
        read = await client.call_tool(
            "read_range", {"root": match["root"], "path": path, "start": start - 1, "end": start}
        )
        hidden = await client.call_tool("grep", {"pattern": "zebrafalcon_rotate"})
        escape = await client.call_tool("read_range", {"root": "shop", "path": "../alpha/app.py"})
        return found, read, hidden, escape

    found, read, hidden, escape = run(mcp_url(live_server), key(), calls)
    assert not found.is_error
    assert [(m["root"], m["citation"]) for m in found.structured_content["matches"]] == [("shop", "app.py:6-6")]
    assert found.content[0].text.splitlines()[1] == "[shop] app.py:6-6: HANDLE_ORDER_LIMIT = 3"
    assert not read.is_error
    assert read.structured_content["content"] == "\nHANDLE_ORDER_LIMIT = 3"
    assert read.content[0].text.startswith("app.py:5-6 (root shop;")
    assert hidden.structured_content["matches"] == []  # bot alpha's root is outside a plain key's scope
    assert escape.is_error and escape.structured_content["status"] == 400

    seen = run(
        mcp_url(live_server),
        key(bot_id="alpha"),
        lambda client: client.call_tool("grep", {"pattern": "zebrafalcon_rotate"}),
    )
    assert [m["root"] for m in seen.structured_content["matches"]] == ["alpha"]


def test_arguments_cannot_widen_the_scope(live_server, skills):
    result = run(
        mcp_url(live_server),
        key(),
        lambda client: client.call_tool("search", {"query": "zebrafalcon", "bot_id": "alpha"}),
    )
    assert result.is_error and result.structured_content["status"] == 403
    assert "may not act for bot 'alpha'" in result.content[0].text


def test_invalid_arguments_are_a_tool_error_not_a_transport_failure(live_server, skills):
    async def calls(client: Client):
        return (
            await client.call_tool("search", {"query": "backups", "k": 0}),
            await client.call_tool("get_skill", {}),
            await client.call_tool("search", {"query": "backups"}),
        )

    bad_k, no_slug, good = run(mcp_url(live_server), key(), calls)
    assert bad_k.is_error and bad_k.content[0].text.startswith(
        "invalid arguments: k: Input should be greater than or equal to 1"
    )
    assert no_slug.is_error and "slug: Field required" in no_slug.content[0].text
    assert not good.is_error  # the same connection goes on working


def test_an_unknown_tool_is_a_protocol_error(live_server, skills):
    async def calls(client: Client):
        try:
            await client.call_tool("delete_everything", {})
        except MCPError as exc:  # caught here: leaving the client's task groups would wrap it in a group
            return exc

    error = run(mcp_url(live_server), key(), calls)
    assert error.code == INVALID_PARAMS and error.message.startswith("unknown tool 'delete_everything'")


def test_tool_schemas_inline_nested_models_and_keep_a_field_named_title():
    class Inner(Schema):
        title: str = Field(..., description="A field called title.")

    class Outer(Schema):
        inner: Inner
        many: list[Inner]

    schema = schema_for_model(Outer)
    assert schema["properties"]["inner"] == {
        "properties": {"title": {"description": "A field called title.", "type": "string"}},
        "required": ["title"],
        "type": "object",
    }
    assert schema["properties"]["many"]["items"] == schema["properties"]["inner"]
    assert "$defs" not in schema and "title" not in schema


def test_without_a_valid_key_the_request_is_refused_with_401(live_server, skills):
    for headers in ({}, {"Authorization": "Bearer rag_deadbeef_not-a-key"}, {"Authorization": "Basic abc"}):
        response = httpx2.post(mcp_url(live_server), json=INITIALIZE, headers={**MCP_HEADERS, **headers})
        assert response.status_code == 401, headers
        challenge = response.headers["WWW-Authenticate"]
        # RFC 9728: where a client learns that a bearer key, not OAuth, is the way in.
        assert challenge.startswith('Bearer realm="rag-site", resource_metadata="http://'), challenge
        assert challenge.split('resource_metadata="')[1].split('"')[0].endswith("/.well-known/oauth-protected-resource")
        assert ('error="invalid_token"' in challenge) == bool(headers), challenge  # no error code without a key
        assert response.json()["error"]

    # The SDK client turns the 401 into an MCPError, raised out of its task groups.
    with pytest.RaisesGroup(pytest.RaisesExc(MCPError, match="error response"), flatten_subgroups=True):
        run(mcp_url(live_server), None, lambda client: client.list_tools())


def test_over_the_rate_limit_the_request_is_refused_with_429(live_server, skills):
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {key(rate_limit_per_minute=1)}"}
    # The window is a fixed minute: three requests cross at most one window boundary, so two share a window.
    answers = [httpx2.post(mcp_url(live_server), json=INITIALIZE, headers=headers) for _ in range(3)]
    codes = [answer.status_code for answer in answers]
    assert codes[0] == 200 and 429 in codes[1:] and set(codes) == {200, 429}, codes
    refused = next(answer for answer in answers if answer.status_code == 429)
    assert 1 <= int(refused.headers["Retry-After"]) <= 60


def test_get_and_delete_are_not_served_without_sessions(live_server, skills):
    headers = {"Authorization": f"Bearer {key()}", "Accept": "text/event-stream"}
    for method in ("GET", "DELETE"):
        response = httpx2.request(method, mcp_url(live_server), headers=headers)
        assert response.status_code == 405, method
        assert response.headers["Allow"] == "POST"


def test_a_body_over_the_upload_limit_is_refused_with_413(live_server, skills, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "search", "arguments": {"query": "x" * 20_000}},
    }
    response = httpx2.post(mcp_url(live_server), json=call, headers={**MCP_HEADERS, "Authorization": f"Bearer {key()}"})
    assert response.status_code == 413
    assert response.json()["error"] == "the request body is too large"


def test_a_plain_http_post_gets_one_json_answer_and_no_session(live_server, skills):
    response = httpx2.post(
        mcp_url(live_server), json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {key()}"}
    )
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("application/json")
    assert "Mcp-Session-Id" not in response.headers
    assert response.json()["result"]["serverInfo"]["name"] == "rag-site"


def test_a_browser_origin_must_be_an_allowed_host_or_a_trusted_origin(skills, settings):
    # DNS rebinding: a page on another site, its name pointed at this server, calls it from the user's browser.
    client = api_client()
    for origin in ("http://evil.example", "http://testserver.evil.example", "null", "file://"):
        refused = mcp_post(client, INITIALIZE, Origin=origin)
        assert refused.status_code == 403, origin
        assert "ALLOWED_HOSTS" in refused.json()["error"] and "CSRF_TRUSTED_ORIGINS" in refused.json()["error"]
    assert mcp_post(DjangoClient(), INITIALIZE, Origin="http://evil.example").status_code == 403  # before the key

    assert mcp_post(client, INITIALIZE, Origin="http://testserver").status_code == 200  # the server's own host
    assert (
        mcp_post(client, INITIALIZE, Origin="https://testserver:8443").status_code == 200
    )  # any port, as ALLOWED_HOSTS
    settings.CSRF_TRUSTED_ORIGINS = ["https://agents.example.com", "https://*.tools.example.com"]
    for origin in ("https://agents.example.com", "https://chat.tools.example.com"):
        assert mcp_post(client, INITIALIZE, Origin=origin).status_code == 200, origin
    assert mcp_post(client, INITIALIZE, Origin="http://agents.example.com").status_code == 403  # another scheme
    assert mcp_post(client, INITIALIZE).status_code == 200  # no Origin: not a browser


def test_the_path_with_a_trailing_slash_is_served_too(skills):
    response = mcp_post(api_client(), INITIALIZE, path="/mcp/")
    assert response.status_code == 200, response.content
    assert response.json()["result"]["serverInfo"]["name"] == "rag-site"


@pytest.mark.parametrize("body", [b"not json", b"[]", b"{}"])
def test_a_body_that_is_not_a_json_rpc_message_is_a_400_from_the_sdk(skills, body):
    response = mcp_post(api_client(), body)
    assert response.status_code == 400
    assert response.json()["error"]["message"]


def test_a_failure_inside_the_transport_is_a_json_500_without_a_traceback(skills, monkeypatch, caplog):
    async def broken(self, scope, receive, send):
        raise RuntimeError("the SDK broke: /srv/secret/path")

    monkeypatch.setattr(StreamableHTTPSessionManager, "handle_request", broken)
    with caplog.at_level(logging.ERROR, logger="surfaces.mcp_transport"):
        response = mcp_post(api_client(), INITIALIZE)
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"error": INTERNAL_ERROR, "detail": INTERNAL_ERROR, "errors": [], "data": {}}
    logged = [record for record in caplog.records if record.name == "surfaces.mcp_transport"]
    assert logged and logged[0].exc_info and "the SDK broke" in caplog.text  # the server log has the details


@pytest.mark.parametrize("message_id", [{}, [], True, 1.5, None])
def test_a_message_whose_id_is_not_a_string_or_an_integer_is_an_invalid_request_answered_with_id_null(
    skills, message_id
):
    # The SDK read such a message as a notification: 202 and an empty body, and the request was never answered.
    response = mcp_post(api_client(), {"jsonrpc": "2.0", "id": message_id, "method": "tools/list"})
    assert response.status_code == 400, response.content
    answer = response.json()
    assert answer["jsonrpc"] == "2.0" and answer["id"] is None
    assert answer["error"]["code"] == INVALID_REQUEST and "id" in answer["error"]["message"]


def test_a_notification_without_an_id_is_still_accepted(skills):
    response = mcp_post(api_client(), {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert response.status_code == 202
