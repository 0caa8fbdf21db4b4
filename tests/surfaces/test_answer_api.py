"""POST /api/v1/answer on the real servers: an indexed root, the real embedding model, a fake chat model over HTTP."""

import json

import pytest

from kernel.llm import process_breaker
from sources.models import WorkspaceRoot
from tests.conftest import index_root
from tests.openai_server import http_error, paced, slow

pytestmark = pytest.mark.django_db

QUESTION = "how large may an upload be and how often is a failed job retried"
FILES = {
    "uploads.md": "# Uploads\n\nAn upload may be at most 25 MB. Larger files are refused with a clear message.\n",
    "workers.md": "# Workers\n\nA failed job is retried 3 times, then marked failed with its reason.\n",
}


@pytest.fixture
def answering(tmp_path, settings, openai_server):
    """An indexed root and the fake model as the chat model (its breaker closed: Redis outlives a test)."""
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    tree = tmp_path / "ops"
    tree.mkdir()
    for name, text in FILES.items():
        (tree / name).write_text(text)
    index_root(WorkspaceRoot.objects.create(name="ops", path=str(tree)))
    settings.RAG_SIMILARITY_THRESHOLD_FILE = -1.0
    settings.RAG_RATE_LIMIT_PER_MINUTE = 0
    settings.RAG_LLM_BASE_URL, settings.RAG_LLM_MODEL = openai_server.base_url, "writer"
    settings.RAG_LLM_RETRY_INITIAL_WAIT = 0.01
    process_breaker().close("writer")
    return openai_server


def ask(client, **payload):
    return client.post(
        "/api/v1/answer", data=json.dumps({"query": QUESTION, **payload}), content_type="application/json"
    )


def streamed(client, **payload) -> list[tuple[str, dict | None]]:
    """The stream's events in order, as (name, data); a keep-alive comment as ("keep-alive", None)."""
    response = ask(client, stream=True, **payload)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/event-stream")
    raw = b"".join(response.streaming_content).decode()
    events: list[tuple[str, dict | None]] = []
    for block in raw.split("\n\n"):
        if not block:
            continue
        if block.startswith(": keep-alive"):
            events.append(("keep-alive", None))
            continue
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((fields["event"], json.loads(fields["data"])))
    return events


def named(events, name: str) -> list[dict]:
    return [data for event, data in events if event == name]


def test_a_streamed_answer_sends_the_sources_then_the_text_then_done(answering, key_client):
    answering.script("writer", paced(0.0, "An upload may be at most 25 MB [1]. A failed job is retried 3 times [2]."))
    events = [e for e in streamed(key_client) if e[0] != "keep-alive"]
    names = [name for name, _ in events]
    assert names[0] == "sources" and names[-1] == "done"
    assert set(names[1:-1]) == {"delta"} and len(names) > 4  # the fake writes 4 characters a delta
    sources = named(events, "sources")[0]["sources"]
    assert [s["number"] for s in sources] == list(range(1, len(sources) + 1))
    assert {s["path"] for s in sources} == set(FILES)
    assert all(s["url"].startswith("/view/file/") and "#L" in s["url"] for s in sources)
    text = "".join(d["text"] for d in named(events, "delta"))
    assert text == "An upload may be at most 25 MB [1]. A failed job is retried 3 times [2]."
    done = named(events, "done")[0]
    assert [c["number"] for c in done["citations"]] == [1, 2]
    assert done["citations"][0]["citation"] == sources[0]["citation"]
    assert done["usage"]["completion_tokens"] > 0
    assert done["dropped_markers"] == 0 and done["uncited_numeric_sentences"] == []
    asked = answering.requests(model="writer")[-1].body
    assert asked["stream"] is True
    assert all(s["citation"] in asked["messages"][-1]["content"] for s in sources)  # the model saw every source


def test_a_marker_naming_no_source_is_dropped_and_counted(answering, key_client):
    answering.script("writer", paced(0.0, "Uploads are capped [1][9]. See also [12]."))
    events = streamed(key_client)
    text = "".join(d["text"] for d in named(events, "delta"))
    assert text == "Uploads are capped [1]. See also ."
    done = named(events, "done")[0]
    assert done["dropped_markers"] == 2
    assert [c["number"] for c in done["citations"]] == [1]
    assert any("2 citation markers named no source" in w for w in done["warnings"])


def test_a_sentence_with_a_number_that_cites_nothing_is_reported(answering, key_client):
    answering.script("writer", paced(0.0, "An upload may be at most 25 MB [1]. A failed job is retried 3 times."))
    done = named(streamed(key_client), "done")[0]
    assert done["uncited_numeric_sentences"] == ["A failed job is retried 3 times."]
    assert any("A failed job is retried 3 times." in w for w in done["warnings"])


def test_a_slow_model_gets_keep_alive_comments_until_it_writes(answering, key_client, settings):
    settings.RAG_ANSWER_KEEPALIVE_SECONDS = 0.1
    answering.script("writer", slow(0.8))
    events = streamed(key_client)
    names = [name for name, _ in events]
    first_delta = names.index("delta")
    assert names[0] == "sources"
    assert "keep-alive" in names[1:first_delta]  # the silence before the first word was filled
    assert names[-1] == "done"


def test_without_stream_the_same_answer_is_one_json_object(answering, key_client):
    answering.script("writer", paced(0.0, "An upload may be at most 25 MB [1]. Jobs retry 3 times [7]."))
    response = ask(key_client)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["answer"] == "An upload may be at most 25 MB [1]. Jobs retry 3 times ."
    assert body["error"] is None
    assert {s["path"] for s in body["sources"]} == set(FILES)
    assert [c["number"] for c in body["citations"]] == [1]
    assert body["dropped_markers"] == 1
    assert body["uncited_numeric_sentences"] == ["Jobs retry 3 times ."]


@pytest.mark.parametrize(
    ("fault", "kind"),
    [("down", "model_unavailable"), ("breaker", "breaker_open"), ("timeout", "timeout"), ("empty", "empty_retrieval")],
)
def test_when_no_answer_can_be_written_the_error_says_why_and_the_sources_still_come(
    answering, key_client, settings, fault, kind
):
    payload = {}
    if fault == "down":
        answering.fail_always("writer", http_error(500))
    elif fault == "breaker":
        process_breaker().trip("writer", seconds=60, reason="test")
    elif fault == "timeout":
        settings.RAG_ANSWER_TIMEOUT = 0.3
        answering.fail_always("writer", slow(5))
    else:
        payload = {"sources": ["skill"]}  # no skill is indexed: nothing to answer from
    for stream in (True, False):
        if fault != "breaker":
            process_breaker().close("writer")  # the first run's failure opened it: each form meets the fault itself
        if stream:
            events = streamed(key_client, **payload)
            names = [name for name, _ in events if name != "keep-alive"]
            assert names == ["sources", "error", "done"]
            sources, error = named(events, "sources")[0]["sources"], named(events, "error")[0]
        else:
            body = ask(key_client, **payload).json()
            sources, error = body["sources"], body["error"]
            assert body["answer"] == ""
        assert error["kind"] == kind and error["message"]
        assert len(sources) == (0 if fault == "empty" else len(FILES))
    if fault == "empty":
        assert answering.count(model="writer") == 0  # nothing was asked of the model
    process_breaker().close("writer")


def test_without_a_chat_model_the_answer_endpoint_says_how_to_turn_it_on(answering, key_client, settings):
    settings.RAG_LLM_BASE_URL, settings.RAG_LLM_MODEL = "", ""
    response = ask(key_client, stream=True)
    assert response.status_code == 503
    assert "RAG_LLM_BASE_URL" in response.json()["error"]


def test_answers_past_the_per_process_limit_are_refused_until_one_ends(answering, key_client, settings):
    settings.RAG_ANSWER_STREAMS = 1
    answering.script("writer", slow(0.5))
    first = ask(key_client, stream=True)
    assert first.status_code == 200
    refused = ask(key_client, stream=True)
    assert refused.status_code == 429 and refused["Retry-After"] == "5"
    assert "RAG_ANSWER_STREAMS" in refused.json()["error"]
    b"".join(first.streaming_content)  # read to its end: the test client then closes the response, as a server does
    assert ask(key_client).status_code == 200
