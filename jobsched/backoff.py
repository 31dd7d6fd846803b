"""Retry backoff: base * 2^attempts, capped, optionally jittered; by default 2^attempts seconds capped at 5
minutes (where a job type sets none): waits of 2, 4, 8 … s. One rule for every job type; a type's registration
may change its base, cap and jitter.

The first wait is twice the base (the exponent counts the failed attempts, from 1), not the base itself. That is
kept as it is: the base is stored in every executor's announcement of its types and on every job created with a
backoff other than the default (baseSeconds: backoff_document), and read back wherever an attempt closes, so a new
meaning would change the waits of every registered Backoff, and those of jobs stored by an earlier version,
without anyone having changed a setting."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 300.0
BACKOFF_CAP = timedelta(seconds=BACKOFF_CAP_S)


@dataclass(frozen=True)
class Backoff:
    """The wait before retry n+1 after n failed attempts: min(base_s * 2^n, cap_s) seconds. n counts from 1, so
    `base_s` is half the first wait, not the first wait: Backoff() (base 1 s) waits 2, 4, 8 … s, and
    Backoff(base_s=5, cap_s=60) waits 10, 20, 40, 60, 60 … s; for a first wait of w seconds, set base_s=w/2.
    With jitter, a uniform draw from the upper half of each wait, so that jobs that failed together do not retry
    together, and none retries sooner than half its delay."""

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


def backoff_document(backoff: Backoff) -> dict[str, Any]:
    """The stored form of `backoff` (camelCase, as every stored field): in a type's announcement, and on a job."""
    return {"baseSeconds": backoff.base_s, "capSeconds": backoff.cap_s, "jitter": backoff.jitter}


def backoff_from_document(doc: dict[str, Any]) -> Backoff:
    """The inverse of backoff_document; a field left out is the default's. TypeError or ValueError when what is
    there is no backoff."""
    return Backoff(
        base_s=float(doc.get("baseSeconds", DEFAULT_BACKOFF.base_s)),
        cap_s=float(doc.get("capSeconds", DEFAULT_BACKOFF.cap_s)),
        jitter=bool(doc.get("jitter", DEFAULT_BACKOFF.jitter)),
    )
