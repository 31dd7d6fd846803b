"""The per-key token bucket, on a clock the test moves."""

from __future__ import annotations

import pytest

from services.api.http.rate_limits import TokenBuckets
from tests.support import MovedClock


def test_a_full_bucket_allows_a_burst_then_refills_at_the_rate() -> None:
    clock = MovedClock(100.0)
    buckets = TokenBuckets(rate=2, burst=3, clock=clock)
    assert [buckets.take("k") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("k") == pytest.approx(0.5)  # one token every 0.5 s
    clock.now += 0.25
    assert buckets.take("k") == pytest.approx(0.25)  # refused requests spend nothing
    clock.now += 0.25
    assert buckets.take("k") == 0.0
    clock.now += 60
    assert [buckets.take("k") for _ in range(4)][-1] > 0  # refills only up to the burst


def test_keys_have_buckets_of_their_own() -> None:
    clock = MovedClock(100.0)
    buckets = TokenBuckets(rate=1, burst=1, clock=clock)
    assert buckets.take("a") == 0.0
    assert buckets.take("a") > 0
    assert buckets.take("b") == 0.0
