"""The one Redis client factory: every user of the broker's Redis shares one client that gives up fast."""

import pytest

from access import ratelimit
from kernel import heartbeats
from kernel.config import redis_config
from kernel.llm import process_breaker
from kernel.redis import TIMEOUT_SECONDS, RedisConfig, redis_client

pytestmark = pytest.mark.unit


def test_the_breaker_the_rate_limits_and_the_heartbeats_share_one_client():
    breaker_client = process_breaker()._redis_client
    assert breaker_client is not None
    assert heartbeats.redis_client() is ratelimit.redis_client() is breaker_client()
    assert heartbeats.redis_client() is redis_client(redis_config())


def test_the_client_gives_up_fast_retries_once_and_answers_text():
    client = redis_client(redis_config())
    options = client.connection_pool.connection_kwargs
    assert options["socket_timeout"] == options["socket_connect_timeout"] == TIMEOUT_SECONDS
    assert options["decode_responses"] is True
    assert client.get_retry()._retries == 1


def test_another_url_or_timeout_gets_its_own_client_and_the_same_one_gets_the_same(settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/3"
    moved = heartbeats.redis_client()
    assert moved.connection_pool.connection_kwargs["db"] == 3
    assert moved is ratelimit.redis_client() is redis_client(RedisConfig("redis://127.0.0.1:1/3"))
    slower = redis_client(RedisConfig("redis://127.0.0.1:1/3", timeout=2.0))
    assert slower is not moved and slower.connection_pool.connection_kwargs["socket_timeout"] == 2.0
