import json

import pytest

from kernel.errors import ApplicationError
from sources import tools
from sources.models import Tool

pytestmark = pytest.mark.django_db

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name, e.g. Lisbon"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city"],
}


def make(name: str, description: str, parameters: dict, server: str = "") -> Tool:
    tool = Tool.objects.create(name=name, server=server, description=description, parameters=parameters)
    assert tools.tool_index(tool_id=tool.pk).skipped is False
    return tool


def test_the_key_follows_name_and_server():
    assert Tool.objects.create(name="get_weather").key == "local:get_weather"
    assert Tool.objects.create(name="search", server="github").key == "mcp:github:search"


def test_the_indexed_text_names_every_parameter():
    text = tools.tool_text(Tool(name="get_weather", description="Current weather.", parameters=WEATHER))
    assert "get weather" in text and "- city: string (required) City name" in text and "- unit: string" in text


def test_tool_search_returns_openai_function_schemas(key_client):
    make("get_weather", "Current weather for a city.", WEATHER)
    make(
        "create_issue",
        "Open an issue in a repository.",
        {"type": "object", "properties": {"title": {"type": "string"}}},
        server="github",
    )
    response = key_client.post(
        "/api/v1/tools/search",
        data=json.dumps({"query": "what is the temperature in Lisbon", "k": 2}),
        content_type="application/json",
    )
    assert response.status_code == 200
    first = response.json()["tools"][0]
    assert first["key"] == "local:get_weather"
    assert first["openai_schema"] == {
        "type": "function",
        "function": {"name": "get_weather", "description": "Current weather for a city.", "parameters": WEATHER},
    }
    hybrid = key_client.post(
        "/api/v1/search",
        data=json.dumps({"query": "open a github issue", "sources": ["tool"]}),
        content_type="application/json",
    ).json()["hits"]
    assert hybrid[0]["tool"]["function"]["name"] == "create_issue"


def test_an_unchanged_tool_is_not_embedded_again():
    tool = make("get_weather", "Current weather.", WEATHER)
    assert tools.tool_index(tool_id=tool.pk).skipped is True


def test_new_chunk_settings_re_embed_no_tool(settings):
    """A tool is one chunk as written: no chunk setting is part of its fingerprint."""
    tool = make("get_weather", "Current weather.", WEATHER)
    settings.RAG_CHUNK_MAX_CHARS = settings.RAG_CHUNK_MAX_CHARS + 300
    settings.RAG_CHUNK_OVERLAP = settings.RAG_CHUNK_OVERLAP + 100
    assert tools.tool_index(tool_id=tool.pk).skipped is True


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ([1, 2], "must be a JSON object"),
        ({"type": "string"}, "must describe an object"),
        ({"type": "object", "properties": {"a": {"type": "nonsense"}}}, "not a valid JSON Schema"),
    ],
)
def test_invalid_schemas_are_refused_with_a_reason(parameters, message):
    from surfaces.admin.roots import ToolForm

    with pytest.raises(ApplicationError, match=message):
        tools.tool_parameters_validate(parameters)
    form = ToolForm(
        data={"name": "t", "server": "", "description": "", "parameters": json.dumps(parameters), "enabled": True}
    )
    assert not form.is_valid() and message in form.errors["parameters"][0]
