"""The LLM client against a real OpenAI-compatible server with scripted faults: retries, fallback, breaker."""

import json
import logging
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path

import pytest

from kernel.breaker import Admission, Breaker, BreakerState
from kernel.config import redis_config
from kernel.errors import Unavailable, http_status
from kernel.llm import (
    ErrorKind,
    LLMClient,
    LLMConfig,
    LLMError,
    LLMRejected,
    LLMUnavailable,
    backoff_wait,
    llm_chat,
    llm_embed,
    llm_status,
    retry_after_seconds,
    status_kind,
)
from kernel.redis import RedisConfig, redis_client, redis_connect
from tests.openai_server import dropped, fake_embedding, http_error, malformed, slow

ROOT = Path(__file__).resolve().parent.parent
PROMPT = [{"role": "system", "content": "Describe the chunk."}, {"role": "user", "content": "the axolotl replica"}]


def shared():
    """The broker's Redis, as every process's breaker uses it."""
    return redis_client(redis_config())


class Clock:
    """Wall time for the breaker, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def make_client(server, *models: str, breaker: Breaker | None = None, clock=None, **options) -> tuple[LLMClient, list]:
    """A client of ``server`` for the chain ``models`` that records its waits instead of sleeping them."""
    config = LLMConfig(
        base_url=server.base_url,
        api_key=options.pop("api_key", ""),
        model=models[0],
        fallback_models=models[1:],
        **{
            "timeout": 5.0,
            "max_retries": 2,
            "retry_initial_wait": 0.5,
            "rate_limit_initial_wait": 4.0,
            "cooldown_seconds": 300.0,
            **options,
        },
    )
    waits: list[float] = []
    breaker = breaker or Breaker(redis_client=None, clock=clock or Clock())
    # jitter 1.0: each wait is the top of its full-jitter range, so the waits are known.
    return LLMClient(config, breaker=breaker, sleep=waits.append, jitter=lambda: 1.0), waits


def unique(name: str) -> str:
    """A model name no other test uses: the shared Redis keeps state per model name."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


# --- the policy, without a server ----------------------------------------------


@pytest.mark.unit
def test_backoff_is_full_jitter_doubling_up_to_the_cap():
    assert [backoff_wait(n, base=2.0, cap=10.0, jitter=lambda: 1.0) for n in range(5)] == [2.0, 4.0, 8.0, 10.0, 10.0]
    assert backoff_wait(3, base=2.0, cap=10.0, jitter=lambda: 0.0) == 0.0
    assert all(0.0 <= backoff_wait(2, base=2.0, cap=10.0) <= 8.0 for _ in range(200))


@pytest.mark.unit
@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [
        (429, ErrorKind.RATE_LIMIT, True),
        (408, ErrorKind.TIMEOUT, True),
        (500, ErrorKind.SERVER, True),
        (502, ErrorKind.SERVER, True),
        (503, ErrorKind.SERVER, True),
        (504, ErrorKind.SERVER, True),
        (501, ErrorKind.SERVER_FATAL, False),
        (404, ErrorKind.NOT_FOUND, False),
        (400, ErrorKind.REJECTED, False),
        (401, ErrorKind.REJECTED, False),
        (403, ErrorKind.REJECTED, False),
        (422, ErrorKind.REJECTED, False),
    ],
)
def test_statuses_are_classed(status, kind, retryable):
    assert status_kind(status) is kind
    assert kind.retryable is retryable


@pytest.mark.unit
def test_retry_after_is_read_as_seconds_milliseconds_or_a_date():
    now = 1_700_000_000.0
    date = format_datetime(datetime.fromtimestamp(now + 30, tz=UTC), usegmt=True)
    assert retry_after_seconds({"Retry-After": "7"}) == 7.0
    assert retry_after_seconds({"retry-after-ms": "1500", "Retry-After": "9"}) == 1.5
    assert retry_after_seconds({"Retry-After": date}, now=now) == 30.0
    assert retry_after_seconds({"Retry-After": "soon"}) is None
    assert retry_after_seconds({}) is None


@pytest.mark.unit
def test_a_chat_sends_the_messages_its_limits_and_extra_fields(openai_server):
    openai_server.on_chat(lambda model, body: f"{len(body['messages'])} messages to {model}")
    client, _ = make_client(openai_server, "primary")
    answer = client.chat(PROMPT, max_tokens=32, extra_body={"response_format": {"type": "json_object"}})
    assert answer == "2 messages to primary"
    sent = openai_server.requests(path="chat/completions")[0].body
    assert sent == {
        "model": "primary",
        "messages": PROMPT,
        "max_tokens": 32,
        "temperature": 0.0,
        "response_format": {"type": "json_object"},
    }


# --- retries per error class ----------------------------------------------------


@pytest.mark.unit
def test_a_rate_limited_call_waits_what_retry_after_says_then_answers(openai_server):
    openai_server.script("primary", http_error(429, retry_after=3), http_error(429, retry_after=1))
    client, waits = make_client(openai_server, "primary")
    assert client.chat(PROMPT, max_tokens=32) == "primary: the axolotl replica"
    assert waits == [3.0, 1.0]
    assert openai_server.count(model="primary") == 3


@pytest.mark.unit
def test_a_rate_limit_without_retry_after_backs_off_from_its_own_base(openai_server):
    openai_server.script("primary", http_error(429))
    client, waits = make_client(openai_server, "primary")
    client.chat(PROMPT, max_tokens=32)
    assert waits == [4.0]  # rate_limit_initial_wait, not retry_initial_wait


@pytest.mark.unit
def test_transient_server_errors_are_retried_with_growing_waits(openai_server):
    openai_server.script("primary", http_error(500), http_error(503), http_error(502))
    client, waits = make_client(openai_server, "primary", max_retries=3)
    assert client.chat(PROMPT, max_tokens=32) == "primary: the axolotl replica"
    assert waits == [0.5, 1.0, 2.0]
    assert openai_server.count(model="primary") == 4


@pytest.mark.unit
def test_timeouts_and_dropped_connections_are_retried(openai_server):
    openai_server.script("primary", slow(10), dropped())
    client, waits = make_client(openai_server, "primary", timeout=0.3)
    assert client.chat(PROMPT, max_tokens=32) == "primary: the axolotl replica"
    assert len(waits) == 2
    assert openai_server.count(model="primary") == 3
    errors = client.breaker.status(["primary"])[0].errors
    assert errors == {"timeout": 1, "connection": 1}


@pytest.mark.unit
def test_a_refused_connection_is_a_connection_error():
    waits: list[float] = []
    config = LLMConfig(base_url="http://127.0.0.1:1/v1", model="primary", max_retries=1, retry_initial_wait=0.5)
    client = LLMClient(
        config, breaker=Breaker(redis_client=None, clock=Clock()), sleep=waits.append, jitter=lambda: 1.0
    )
    with pytest.raises(LLMUnavailable) as failure:
        client.chat(PROMPT, max_tokens=8)
    assert failure.value.details["models"][0]["error"] == "connection"
    assert waits == [0.5]


@pytest.mark.unit
def test_other_client_errors_are_not_retried_nor_sent_to_another_model(openai_server):
    openai_server.script("primary", http_error(400, message="max_tokens is too large"))
    client, waits = make_client(openai_server, "primary", "backup")
    with pytest.raises(LLMRejected, match="max_tokens is too large") as failure:
        client.chat(PROMPT, max_tokens=10**6)
    assert isinstance(failure.value, LLMError) and isinstance(failure.value, Unavailable)
    assert openai_server.models_called() == ["primary"] and waits == []
    assert client.breaker.status(["primary"])[0].state is BreakerState.CLOSED  # the model is fine; the request is not


# --- the fallback chain ---------------------------------------------------------


@pytest.mark.unit
def test_a_model_out_of_retries_falls_back_along_the_chain_skipping_models_already_tried(openai_server):
    openai_server.fail_always("first", http_error(503))
    openai_server.fail_always("second", malformed())
    client, _ = make_client(openai_server, "first", "second", "first", "third")
    assert client.chat(PROMPT, max_tokens=32) == "third: the axolotl replica"
    # 3 attempts (max_retries 2) of a 503; a malformed answer is not retried; "first" is not tried twice.
    assert openai_server.models_called() == ["first", "first", "first", "second", "third"]


@pytest.mark.unit
def test_a_model_the_server_does_not_know_falls_back_at_once(openai_server):
    openai_server.models = {"known"}
    client, waits = make_client(openai_server, "missing", "known")
    assert client.chat(PROMPT, max_tokens=32) == "known: the axolotl replica"
    assert openai_server.models_called() == ["missing", "known"] and waits == []


@pytest.mark.unit
def test_an_exhausted_chain_raises_a_typed_error_that_names_each_model(openai_server):
    openai_server.fail_always("first", http_error(500))
    openai_server.fail_always("second", slow(10))
    client, _ = make_client(openai_server, "first", "second", timeout=0.3, max_retries=1)
    with pytest.raises(LLMUnavailable) as failure:
        client.chat(PROMPT, max_tokens=32)
    error = failure.value
    assert isinstance(error, Unavailable) and http_status(error) == 503
    assert "first server after 2 attempt(s)" in error.message and "second timeout after 2 attempt(s)" in error.message
    assert [m["model"] for m in error.details["models"]] == ["first", "second"]
    assert error.details["retry_after_seconds"] == 300


@pytest.mark.unit
def test_callers_can_degrade_gracefully_by_catching_llm_error(openai_server):
    openai_server.fail_always("only", http_error(503))
    client, _ = make_client(openai_server, "only", max_retries=0)

    def describe(chunk: str) -> str:
        try:
            return client.chat([{"role": "user", "content": chunk}], max_tokens=16)
        except LLMError:
            return ""  # e.g. index the chunk without a description

    assert describe("some code") == ""


# --- the breaker ------------------------------------------------------------------


@pytest.mark.unit
def test_an_open_model_is_skipped_until_its_cooldown_ends_then_probed_once(openai_server):
    clock = Clock()
    openai_server.fail_always("primary", http_error(503))
    client, _ = make_client(openai_server, "primary", "backup", clock=clock)
    assert client.chat(PROMPT, max_tokens=8).startswith("backup")
    assert client.breaker.status(["primary"])[0].state is BreakerState.OPEN

    assert client.chat(PROMPT, max_tokens=8).startswith("backup")
    assert openai_server.count(model="primary") == 3  # skipped: no call while it cools down

    clock.now += 301
    assert client.breaker.status(["primary"])[0].state is BreakerState.HALF_OPEN
    assert client.chat(PROMPT, max_tokens=8).startswith("backup")
    assert openai_server.count(model="primary") == 4  # one probe, no retries: it failed, so it is open again
    assert client.breaker.status(["primary"])[0].state is BreakerState.OPEN

    clock.now += 301
    openai_server.heal("primary")
    assert client.chat(PROMPT, max_tokens=8).startswith("primary")
    assert client.breaker.status(["primary"])[0].state is BreakerState.CLOSED


@pytest.mark.unit
def test_when_every_model_cools_down_the_call_fails_without_a_request(openai_server):
    clock = Clock()
    openai_server.fail_always("first", http_error(500))
    openai_server.fail_always("second", http_error(429, retry_after=600))  # beyond the longest wait: no retry
    client, waits = make_client(openai_server, "first", "second", clock=clock)
    with pytest.raises(LLMUnavailable):
        client.chat(PROMPT, max_tokens=8)
    assert openai_server.models_called() == ["first"] * 3 + ["second"]
    clock.now += 100
    with pytest.raises(LLMUnavailable, match="first cooling down; second cooling down") as failure:
        client.chat(PROMPT, max_tokens=8)
    assert openai_server.count() == 4
    assert failure.value.details["retry_after_seconds"] == 200  # "first" comes back first; "second" waits its 600 s
    assert client.breaker.status(["second"])[0].opened_until == clock.now - 100 + 600


@pytest.mark.unit
def test_without_redis_the_breaker_still_works_in_this_process(openai_server, caplog):
    unreachable = redis_connect(RedisConfig("redis://127.0.0.1:1/0"))
    breaker = Breaker(redis_client=lambda: unreachable, clock=Clock())
    openai_server.fail_always("primary", http_error(503))
    client, _ = make_client(openai_server, "primary", "backup", breaker=breaker)
    with caplog.at_level(logging.WARNING, logger="kernel.breaker"):
        assert client.chat(PROMPT, max_tokens=8).startswith("backup")
        assert client.chat(PROMPT, max_tokens=8).startswith("backup")
    assert openai_server.count(model="primary") == 3
    status = breaker.status(["primary"])[0]
    assert status.state is BreakerState.OPEN and status.shared is False
    assert "Redis unreachable" in caplog.text


# --- embeddings -------------------------------------------------------------------


@pytest.mark.unit
def test_embeddings_come_back_in_order_at_the_requested_size(openai_server):
    client, _ = make_client(openai_server, "chat-model")
    texts = ["retry the axolotl", "retry the replica", "unrelated words"]
    vectors = client.embed(texts, model="embedder", dimensions=16)
    assert vectors == [fake_embedding(text, 16) for text in texts]
    sent = openai_server.requests(path="embeddings")[0].body
    assert sent["model"] == "embedder" and sent["dimensions"] == 16 and sent["input"] == texts
    assert client.embed([], model="embedder") == [] and openai_server.count() == 1


@pytest.mark.unit
def test_embeddings_are_retried_but_never_taken_from_another_model(openai_server):
    openai_server.script("embedder", http_error(503))
    client, waits = make_client(openai_server, "chat-model", "chat-backup")
    assert client.embed(["text"], model="embedder") == [fake_embedding("text")]
    assert waits == [0.5]

    openai_server.fail_always("embedder", http_error(500))
    with pytest.raises(LLMUnavailable) as failure:
        client.embed(["text"], model="embedder")
    assert [m["model"] for m in failure.value.details["models"]] == ["embedder"]
    assert set(openai_server.models_called()) == {"embedder"}


# --- secrets --------------------------------------------------------------------------


@pytest.mark.unit
def test_neither_the_key_nor_the_prompt_reaches_the_log(openai_server, caplog):
    key = "sk-test-" + uuid.uuid4().hex
    openai_server.script("primary", http_error(429, retry_after=0), http_error(500))
    openai_server.script("backup", http_error(401, message=f"Incorrect API key provided: {key}"))
    client, _ = make_client(openai_server, "primary", "backup", api_key=key, max_retries=1)
    with caplog.at_level(logging.DEBUG), pytest.raises(LLMRejected) as failure:
        client.chat(PROMPT, max_tokens=8)
    assert openai_server.requests()[0].headers["Authorization"] == f"Bearer {key}"
    logged = caplog.text + repr(client.config)
    assert key not in logged and key not in failure.value.message and "***" in failure.value.message
    assert "axolotl" not in logged and "Describe the chunk" not in logged
    assert "retrying" in caplog.text  # the retries were logged, without either


# --- settings ----------------------------------------------------------------------------


def settings_in_subprocess(code: str, **environment: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", f"from django.conf import settings\n{code}"],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "rag_site.settings", **environment},
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


@pytest.mark.unit
def test_the_key_can_come_from_a_file_and_the_chain_from_a_list(tmp_path):
    secret = tmp_path / "llm_key"
    secret.write_text("sk-from-a-file\n")
    result = settings_in_subprocess(
        "print(settings.RAG_LLM_API_KEY, settings.RAG_LLM_FALLBACK_MODELS)\n"
        "from kernel.config import llm_config; print(llm_config().chain)",
        RAG_LLM_BASE_URL="http://127.0.0.1:11434/v1",
        RAG_LLM_API_KEY_FILE=str(tmp_path / "llm_key"),
        RAG_LLM_MODEL="qwen3",
        RAG_LLM_FALLBACK_MODELS="llama3, qwen3,phi4",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["sk-from-a-file ['llama3', 'qwen3', 'phi4']", "('qwen3', 'llama3', 'phi4')"]


@pytest.mark.unit
@pytest.mark.parametrize(
    "environment",
    [
        {"RAG_LLM_MODEL": "qwen3"},  # a model, but nowhere to call it
        {"RAG_LLM_BASE_URL": "localhost:11434"},
        {"RAG_LLM_BASE_URL": "http://127.0.0.1:11434/v1", "RAG_LLM_MAX_RETRIES": "-1"},
    ],
)
def test_bad_llm_settings_fail_at_start_up(environment):
    result = settings_in_subprocess("settings.RAG_LLM_MODEL", **environment)
    assert result.returncode != 0 and "ImproperlyConfigured" in result.stderr


# --- shared through Redis (the suite's Valkey) ----------------------------------------------

CROSS_PROCESS = """
import json, sys
import django
django.setup()
from kernel.config import LLMConfig
from kernel.llm import LLMClient
base_url, primary, backup = sys.argv[1:4]
client = LLMClient(LLMConfig(base_url=base_url, model=primary, fallback_models=(backup,), max_retries=0),
                   sleep=lambda seconds: None)
state = lambda: {s.model: str(s.state) for s in client.breaker.status([primary, backup])}
before = state()
answer = client.chat([{"role": "user", "content": "from another process"}], max_tokens=8)
print(json.dumps({"before": before, "answer": answer, "after": state()}))
"""


def chat_in_another_process(server, primary: str, backup: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", CROSS_PROCESS, server.base_url, primary, backup],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "rag_site.settings"},
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_another_process_skips_the_model_this_one_opened_and_closes_it_after_its_probe(openai_server):
    primary, backup = unique("primary"), unique("backup")
    openai_server.fail_always(primary, http_error(503))
    client, _ = make_client(openai_server, primary, backup, breaker=Breaker(redis_client=shared))
    assert client.chat(PROMPT, max_tokens=8).startswith(backup)
    assert openai_server.count(model=primary) == 3

    # Open here, so open there: the other process goes straight to the backup.
    seen = chat_in_another_process(openai_server, primary, backup)
    assert seen["before"][primary] == "open"
    assert seen["answer"] == f"{backup}: from another process"
    assert openai_server.count(model=primary) == 3

    # The cooldown is over (opened in the past): the other process probes, the model answers, it closes for all.
    openai_server.heal(primary)
    Breaker(redis_client=shared, clock=lambda: time.time() - 1000).trip(
        primary, seconds=300, reason="test: cooled down"
    )
    assert client.breaker.status([primary])[0].state is BreakerState.HALF_OPEN
    seen = chat_in_another_process(openai_server, primary, backup)
    assert seen["before"][primary] == "half-open"
    assert seen["answer"] == f"{primary}: from another process"
    assert seen["after"][primary] == "closed"
    assert openai_server.count(model=primary) == 4
    assert client.breaker.status([primary])[0].state is BreakerState.CLOSED


def test_only_one_caller_probes_a_half_open_model():
    model = unique("flaky")
    this, other = (
        Breaker(redis_client=shared),
        Breaker(redis_client=shared),
    )  # separate local state: only Redis is shared
    Breaker(redis_client=shared, clock=lambda: time.time() - 1000).trip(model, seconds=300, reason="test")
    first = this.admit(model, probe_seconds=30)
    second = other.admit(model, probe_seconds=30)
    assert first.allowed and first.probe
    assert not second.allowed
    this.record_success(model, latency_seconds=0.01)  # the probe answered: closed for everyone
    assert other.admit(model, probe_seconds=30) == Admission(allowed=True)


def test_the_status_shows_state_errors_and_latency_per_model(openai_server):
    primary, backup = unique("primary"), unique("backup")
    openai_server.script(primary, http_error(429, retry_after=0), http_error(500))
    openai_server.fail_always(backup, http_error(503, message="backend overloaded"))
    client, _ = make_client(openai_server, primary, backup, breaker=Breaker(redis_client=shared), max_retries=2)
    for _ in range(3):
        client.chat(PROMPT, max_tokens=8)
    with pytest.raises(LLMUnavailable):
        client.chat(PROMPT, models=[backup], max_tokens=8)

    first, second = Breaker(redis_client=shared).status([primary, backup])[
        :2
    ]  # a fresh reader: what any process sees; then other models
    assert first.model == primary and first.state is BreakerState.CLOSED
    assert first.errors == {"rate_limit": 1, "server": 1} and first.last_error.startswith("server: HTTP 500")
    assert first.latency_samples == 3 and 0 < first.latency_p50_ms <= first.latency_p95_ms
    assert first.shared is True
    assert second.state is BreakerState.OPEN and second.opened_until > time.time() + 250
    assert second.errors == {"server": 3} and "backend overloaded" in second.last_error
    assert second.latency_samples == 0 and second.latency_p50_ms is None
    json.dumps(second.as_dict())  # ready for the health endpoint


def test_the_configured_client_answers_and_reports_its_models(openai_server, settings):
    primary, backup = unique("primary"), unique("backup")
    settings.RAG_LLM_BASE_URL = openai_server.base_url
    settings.RAG_LLM_MODEL = primary
    settings.RAG_LLM_FALLBACK_MODELS = [backup]
    openai_server.script(primary, http_error(404))
    assert llm_chat(messages=PROMPT, max_tokens=8) == f"{backup}: the axolotl replica"
    assert llm_embed(texts=["a b"], model="embedder", dimensions=8) == [fake_embedding("a b", 8)]
    states = {s.model: s.state for s in llm_status()}
    assert states[primary] is BreakerState.OPEN and states[backup] is BreakerState.CLOSED
