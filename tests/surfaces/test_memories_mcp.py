"""The memory tools (remember, recall, forget) called by the official MCP client SDK over /mcp, on a live server.

Real PostgreSQL, Redis and embedding model; the key is the caller's identity,
as for the API. Indexing runs in this process through the worker's service.
"""

import pytest
from mcp import Client

from sources.memories import memory_index
from sources.models import Memory
from tests.surfaces.test_mcp import key, mcp_post, mcp_url, run, tool_call

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def no_rate_limit(settings):
    settings.RAG_RATE_LIMIT_PER_MINUTE = 0


def test_an_agent_remembers_recalls_supersedes_and_forgets_with_the_sdk_client(live_server):
    url, alpha = mcp_url(live_server), key(bot_id="alpha")

    async def remember(client: Client):
        return await client.call_tool(
            "remember", {"text": "The staging database moved to db-2.", "conversation_id": "conv-1"}
        )

    remembered = run(url, alpha, remember)
    assert not remembered.is_error, remembered.content
    first = remembered.structured_content
    assert first["status"] == "active" and first["bot_id"] == "alpha" and first["conversation_id"] == "conv-1"
    assert remembered.content[0].text.startswith(f"remembered as memory {first['id']}")
    memory_index(memory_id=first["id"])

    async def recall_and_supersede(client: Client):
        recalled = await client.call_tool("recall", {"query": "where is the staging database"})
        newer = await client.call_tool(
            "remember", {"text": "The staging database moved to db-3.", "supersedes": first["id"]}
        )
        return recalled, newer

    recalled, newer = run(url, alpha, recall_and_supersede)
    assert [m["id"] for m in recalled.structured_content["memories"]] == [first["id"]]
    assert "db-2" in recalled.content[0].text
    second = newer.structured_content
    assert second["supersedes"] == first["id"]
    memory_index(memory_id=second["id"])

    async def recall_forget_recall(client: Client):
        before = await client.call_tool("recall", {"query": "staging database"})
        forgotten = await client.call_tool("forget", {"id": second["id"]})
        after = await client.call_tool("recall", {"query": "staging database"})
        return before, forgotten, after

    before, forgotten, after = run(url, alpha, recall_forget_recall)
    assert [m["text"] for m in before.structured_content["memories"]] == ["The staging database moved to db-3."]
    assert not forgotten.is_error and forgotten.structured_content == {"id": second["id"], "forgotten": True}
    assert after.structured_content["memories"] == []  # the superseded one stays history, not served
    assert Memory.objects.get(pk=first["id"]).superseded_at is not None


def test_a_bot_cannot_recall_or_forget_another_bots_memory_over_mcp(live_server):
    url = mcp_url(live_server)
    written = run(url, key(bot_id="alpha"), lambda c: c.call_tool("remember", {"text": "Zebrafalcon is blue."}))
    memory_id = written.structured_content["id"]
    memory_index(memory_id=memory_id)

    async def calls(client: Client):
        recalled = await client.call_tool("recall", {"query": "zebrafalcon"})
        forgotten = await client.call_tool("forget", {"id": memory_id})
        outside = await client.call_tool("remember", {"text": "Mine now.", "bot_id": "alpha"})
        return recalled, forgotten, outside

    recalled, forgotten, outside = run(url, key(bot_id="beta"), calls)
    assert recalled.structured_content["memories"] == []
    assert forgotten.is_error and forgotten.structured_content["status"] == 404
    assert forgotten.content[0].text == f"memory {memory_id} does not exist"
    assert outside.is_error and outside.structured_content["status"] == 403
    assert Memory.objects.filter(pk=memory_id).exists() and Memory.objects.count() == 1


def test_an_invalid_remember_is_a_tool_error_a_model_can_read(client):
    from django.test import Client as DjangoClient

    agent = DjangoClient(headers={"Authorization": f"Bearer {key(bot_id='alpha')}"})
    result = tool_call(agent, "remember", {"text": "", "expire_at": "tomorrow"})
    assert result["isError"] and result["structuredContent"]["status"] == 422
    assert "text" in result["content"][0]["text"] and "expire_at" in result["content"][0]["text"]
    assert not Memory.objects.exists()
    assert mcp_post(agent, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).status_code == 200
