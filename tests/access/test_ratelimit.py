"""The rate limits' sliding window (access/ratelimit.py), on the suite's real Valkey.

Events are written where the limiter keeps them, with the times they would
have had, so the window is tested at its edges without waiting a minute and
without touching the clock.
"""

import secrets
import time

import pytest

from access.ratelimit import WINDOW_SECONDS, _key, rate_limit_check, rate_limit_count, rate_limit_peek, redis_client
from kernel.errors import Cooldown


def bucket_with(*ages: float) -> str:
    """A new bucket holding one event per age (seconds before now)."""
    bucket = f"test:{secrets.token_hex(6)}"
    now = time.time()
    redis_client().zadd(_key(bucket), {f"past:{n}": now - age for n, age in enumerate(ages)})
    return bucket


def test_requests_of_the_last_minute_count_whichever_minute_of_the_clock_they_fell_in():
    bucket = bucket_with(58, 57, 56)  # a fixed window forgot them whenever the clock's minute had turned since
    with pytest.raises(Cooldown) as refused:
        rate_limit_check(bucket=bucket, limit=3)
    # Served again when the oldest is a minute old: in about two seconds, not at the clock's next minute.
    assert refused.value.details["retry_after_seconds"] in (1, 2, 3)


def test_requests_older_than_a_minute_no_longer_count():
    bucket = bucket_with(WINDOW_SECONDS + 1, WINDOW_SECONDS + 5, 10)
    rate_limit_check(bucket=bucket, limit=2)  # one of the last minute, and this one
    with pytest.raises(Cooldown):
        rate_limit_check(bucket=bucket, limit=2)
    assert redis_client().zcard(_key(bucket)) == 2  # the old ones are dropped, the refused request is not kept


def test_a_refused_request_does_not_push_the_wait_further():
    bucket = bucket_with(30, 20)
    waits = []
    for _ in range(5):
        with pytest.raises(Cooldown) as refused:
            rate_limit_check(bucket=bucket, limit=2)
        waits.append(refused.value.details["retry_after_seconds"])
    assert set(waits) <= {29, 30, 31} and waits == sorted(waits, reverse=True)  # the oldest turns a minute old


def test_peek_counts_nothing_and_refuses_at_the_limit():
    bucket = bucket_with(50, 40)
    rate_limit_peek(bucket=bucket, limit=3, message="not yet")
    assert rate_limit_count(bucket=bucket) == 3
    with pytest.raises(Cooldown, match="over; retry in") as refused:
        rate_limit_peek(bucket=bucket, limit=3, message="over")
    # One must age out for the window to hold fewer than three: the oldest, 50 s old, in about 10 s.
    assert refused.value.details["retry_after_seconds"] in (9, 10, 11)
    assert redis_client().zcard(_key(bucket)) == 3
