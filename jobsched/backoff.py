"""Retry backoff: base * 2^attempts, capped, optionally jittered; by default 2^attempts seconds capped at 5
minutes (where a job type sets none). One rule for every job type; a type's registration may change its base,
cap and jitter."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 300.0
BACKOFF_CAP = timedelta(seconds=BACKOFF_CAP_S)


@dataclass(frozen=True)
class Backoff:
    """The wait before retry n+1 after n failed attempts: min(base_s * 2^n, cap_s) seconds. With jitter, a
    uniform draw from the upper half of that, so that jobs that failed together do not retry together, and
    none retries sooner than half its delay."""

    base_s: float = BACKOFF_BASE_S
    cap_s: float = BACKOFF_CAP_S
    jitter: bool = False

    def __post_init__(self) -> None:
        if not self.base_s > 0 or not self.cap_s >= self.base_s:
            raise ValueError(
                f"backoff needs base_s > 0 and cap_s >= base_s (got base_s={self.base_s}, cap_s={self.cap_s})"
            )

    def delay(self, attempts: int, draw: Callable[[], float] = random.random) -> timedelta:
        """The wait before the next try, given how many attempts have failed so far (>= 1)."""
        # The exponent is bounded so that huge attempt counts cannot overflow: 2^64 * any base passes any cap.
        seconds = min(self.base_s * 2.0 ** min(attempts, 64), self.cap_s)
        if self.jitter:
            seconds = seconds / 2 + draw() * seconds / 2
        return timedelta(seconds=seconds)


DEFAULT_BACKOFF = Backoff()


def retry_delay(attempts: int, backoff: Backoff = DEFAULT_BACKOFF) -> timedelta:
    """The wait before the next try under `backoff` (the default rule unless a job type registered its own)."""
    return backoff.delay(attempts)
