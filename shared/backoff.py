"""Retry backoff: 2^attempts seconds, capped at 5 minutes (the default where a job type sets none)."""

from __future__ import annotations

from datetime import timedelta

BACKOFF_CAP = timedelta(minutes=5)


def retry_delay(attempts: int) -> timedelta:
    """The wait before the next try, given how many attempts have failed so far (>= 1)."""
    if attempts >= 9:  # 2^9 s > 5 min; also keeps huge counts from overflowing
        return BACKOFF_CAP
    return min(timedelta(seconds=2**attempts), BACKOFF_CAP)
