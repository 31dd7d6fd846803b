"""A token bucket per API key: `rate` requests per second on average, bursts of up to `burst`.

Buckets live in each API process (a key's limit applies per replica), keyed by key prefix. They are kept only
for keys that authenticated, so their number is bounded by the keys that exist, not by what clients send.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Bucket:
    tokens: float
    at: float


class TokenBuckets:
    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._rate = rate
        self._burst = float(burst)
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def take(self, key: str) -> float:
        """Spend one token of `key`'s bucket: 0.0 when there was one, otherwise the seconds until there is."""
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(self._burst, now)
        bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.at) * self._rate)
        bucket.at = now
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return 0.0
        return (1 - bucket.tokens) / self._rate
