"""/mcp never runs a call of a writing tool (remember, forget) twice: a lost connection answers 503 instead."""

import json

import pytest

from surfaces.mcp_transport import writes

pytestmark = pytest.mark.unit


def call(name: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name}}).encode()


def test_a_call_of_a_writing_tool_is_never_run_again_after_a_lost_connection():
    assert writes(call("remember")) and writes(call("forget"))
    assert not writes(call("recall")) and not writes(call("search")) and not writes(call("nonsense"))
    assert not writes(b"not json") and not writes(b"[1]") and not writes(b'{"method": "tools/list"}')
