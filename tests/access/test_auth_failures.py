"""Refused callers are rate-limited per client address (issue 22, finding 9), on the real API, /mcp and Redis.

Each test calls from addresses of its own, so the counters other tests
leave in the suite's Valkey never meet its own.
"""

import itertools
import json
import secrets

import pytest
from django.test import Client

from access.keys import api_key_create

pytestmark = pytest.mark.django_db

_addresses = (f"192.0.2.{n}" for n in itertools.count(1))
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}


def search(*, address: str, key: str | None = None, **body):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return Client().post(
        "/api/v1/search",
        data=json.dumps({"query": "anything", **body}),
        content_type="application/json",
        headers=headers,
        REMOTE_ADDR=address,
    )


def mcp(*, address: str, key: str | None = None, message_id: object = 7):
    headers = {**MCP_HEADERS, **({"Authorization": f"Bearer {key}"} if key else {})}
    message = {"jsonrpc": "2.0", "id": message_id, "method": "tools/list"}
    return Client().post(
        "/mcp", data=json.dumps(message), content_type="application/json", headers=headers, REMOTE_ADDR=address
    )


def random_key() -> str:
    return f"rag_{secrets.token_hex(4)}_{secrets.token_urlsafe(24)}"


def test_bad_keys_from_one_address_get_429_with_retry_after_once_over_the_limit(settings):
    settings.RAG_AUTH_FAILURES_PER_MINUTE = 20
    address = next(_addresses)
    # A sliding window: the same answers whichever second of the clock's minute the run starts or crosses.
    codes = [search(address=address, key=random_key()).status_code for _ in range(30)]
    assert codes == [401] * 20 + [429] * 10, codes
    refused = search(address=address, key=random_key())
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert refused.json()["data"]["retry_after_seconds"] == int(refused["Retry-After"])
    assert "too many refused requests" in refused.json()["error"]


def test_a_real_prefix_with_a_wrong_secret_counts_like_any_bad_key(settings):
    settings.RAG_AUTH_FAILURES_PER_MINUTE = 10
    key, raw = api_key_create(name="known prefix")
    address = next(_addresses)
    codes = [
        search(address=address, key=f"rag_{key.prefix}_{secrets.token_urlsafe(24)}").status_code for _ in range(15)
    ]
    assert codes == [401] * 10 + [429] * 5, codes


def test_an_address_over_the_limit_is_refused_even_with_a_good_key_and_others_are_not(settings):
    settings.RAG_AUTH_FAILURES_PER_MINUTE = 5
    settings.RAG_RATE_LIMIT_PER_MINUTE = 0
    _, raw = api_key_create(name="good")
    address = next(_addresses)
    for _ in range(5):
        search(address=address)  # no key at all: 401
    assert search(address=address, key=raw).status_code == 429
    assert search(address=next(_addresses), key=raw).status_code == 200


def test_forbidden_widening_counts_against_the_address(settings):
    settings.RAG_AUTH_FAILURES_PER_MINUTE = 5
    settings.RAG_RATE_LIMIT_PER_MINUTE = 0
    _, raw = api_key_create(name="bot alpha", bot_id="alpha")
    address = next(_addresses)
    codes = [search(address=address, key=raw, bot_id="beta").status_code for _ in range(8)]
    assert codes == [403] * 5 + [429] * 3, codes


def test_unauthenticated_mcp_calls_get_a_json_rpc_429(settings):
    settings.RAG_AUTH_FAILURES_PER_MINUTE = 5
    address = next(_addresses)
    codes = [mcp(address=address).status_code for _ in range(5)]
    assert codes == [401] * 5
    refused = mcp(address=address, key=random_key(), message_id="call-8")
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) >= 1
    body = refused.json()
    assert body["jsonrpc"] == "2.0" and body["id"] == "call-8"
    assert "too many refused requests" in body["error"]["message"]
    assert body["error"]["data"]["retry_after_seconds"] == int(refused["Retry-After"])


def test_a_json_rpc_429_without_a_readable_id_answers_with_a_null_id(settings):
    settings.RAG_AUTH_FAILURES_PER_MINUTE = 1
    address = next(_addresses)
    mcp(address=address)
    refused = mcp(address=address, message_id={"not": "an id"})
    assert refused.status_code == 429 and refused.json()["id"] is None


def test_successful_calls_do_not_count(settings):
    settings.RAG_AUTH_FAILURES_PER_MINUTE = 3
    settings.RAG_RATE_LIMIT_PER_MINUTE = 0
    _, raw = api_key_create(name="good")
    address = next(_addresses)
    assert {search(address=address, key=raw).status_code for _ in range(10)} == {200}


def test_zero_turns_the_limit_off(settings):
    settings.RAG_AUTH_FAILURES_PER_MINUTE = 0
    address = next(_addresses)
    assert {search(address=address, key=random_key()).status_code for _ in range(30)} == {401}


def test_bad_keys_still_get_401_while_redis_is_down(settings):
    """Fail open: a key has 192 random bits, so the limit is about load, and the API must outlive its broker."""
    from tests.conftest import broker_outage

    settings.RAG_AUTH_FAILURES_PER_MINUTE = 1
    address = next(_addresses)
    with broker_outage():
        codes = {search(address=address, key=random_key()).status_code for _ in range(3)}
    assert codes == {401}


def health(*, address: str, key: str | None = None):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return Client().get("/api/v1/health", headers=headers, REMOTE_ADDR=address)


def test_health_answers_an_address_that_is_locked_out(settings):
    """A load balancer behind the same address as a guesser must not see the node as down (issue 39)."""
    settings.RAG_AUTH_FAILURES_PER_MINUTE = 3
    settings.RAG_RATE_LIMIT_PER_MINUTE = 0
    _, raw = api_key_create(name="monitor", can_manage=True)
    address = next(_addresses)
    for _ in range(3):
        search(address=address, key=random_key())
    assert search(address=address, key=raw).status_code == 429  # locked out
    assert health(address=address).status_code == 200
    assert health(address=address, key=raw).status_code == 200
    assert health(address=address, key=random_key()).status_code == 401  # still refused, not 429


def test_a_bad_key_sent_to_health_counts_against_the_address(settings):
    settings.RAG_AUTH_FAILURES_PER_MINUTE = 3
    address = next(_addresses)
    assert {health(address=address, key=random_key()).status_code for _ in range(3)} == {401}
    assert search(address=address, key=random_key()).status_code == 429


def test_health_is_not_counted_against_a_keys_rate_limit(settings):
    _, raw = api_key_create(name="polled", can_manage=True, rate_limit_per_minute=1)
    address = next(_addresses)
    assert [health(address=address, key=raw).status_code for _ in range(3)] == [200] * 3
    assert search(address=address, key=raw).status_code == 200
    assert search(address=address, key=raw).status_code == 429  # the key's limit holds everywhere else


def test_bad_metrics_tokens_from_one_address_get_429(settings):
    """The metrics token is the operator's choice, not 192 random bits: guessing it is limited like a key."""
    settings.RAG_METRICS_TOKEN = "metrics-token-of-the-test"
    settings.RAG_AUTH_FAILURES_PER_MINUTE = 5
    address, other = next(_addresses), next(_addresses)

    def scrape(token: str, address: str):
        return Client().get("/metrics", headers={"Authorization": f"Bearer {token}"}, REMOTE_ADDR=address)

    codes = [scrape(f"guess-{n}", address).status_code for n in range(7)]
    assert codes == [401] * 5 + [429] * 2, codes
    refused = scrape(settings.RAG_METRICS_TOKEN, address)  # the right token waits too, or guessing goes on behind it
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert scrape(settings.RAG_METRICS_TOKEN, other).status_code == 200
