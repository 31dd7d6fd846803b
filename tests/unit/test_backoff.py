"""What a Backoff waits (jobsched/backoff.py): `base_s` is half the first wait, as its docstring and
docs/handlers.md say, and the default's waits are those every release had (2, 4, 8 ... s, capped at 5 min)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobsched import Backoff
from jobsched.backoff import DEFAULT_BACKOFF, retry_delay

pytestmark = pytest.mark.unit


def waits(backoff: Backoff, count: int) -> list[float]:
    return [backoff.delay(failed).total_seconds() for failed in range(1, count + 1)]


def test_the_default_waits_2_4_8_seconds_up_to_5_minutes() -> None:
    assert DEFAULT_BACKOFF == Backoff() == Backoff(base_s=1, cap_s=300, jitter=False)
    assert waits(DEFAULT_BACKOFF, 10) == [2, 4, 8, 16, 32, 64, 128, 256, 300, 300]
    assert retry_delay(1) == timedelta(seconds=2)


def test_the_first_wait_is_twice_the_base() -> None:
    assert waits(Backoff(base_s=5, cap_s=60), 5) == [10, 20, 40, 60, 60]  # the docstring's example
    assert waits(Backoff(base_s=2, cap_s=600), 3) == [4, 8, 16]  # docs/handlers.md's
    assert waits(Backoff(base_s=1.5), 3) == [3, 6, 12]  # a first wait of 3 s: base_s=3/2


def test_jitter_draws_from_the_upper_half_of_each_wait() -> None:
    jittered = Backoff(base_s=5, cap_s=60, jitter=True)
    assert [jittered.delay(1, lambda: 0.0), jittered.delay(1, lambda: 1.0)] == [
        timedelta(seconds=5),
        timedelta(seconds=10),
    ]
