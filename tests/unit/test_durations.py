"""Durations as config and schedules write them: each unit at most once, largest first."""

from __future__ import annotations

from datetime import timedelta

import pytest

from shared.cron import ScheduleError, parse_interval
from shared.durations import parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("500ms", timedelta(milliseconds=500)),
        ("30s", timedelta(seconds=30)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("1.5h", timedelta(hours=1, minutes=30)),
        ("1m5ms", timedelta(minutes=1, milliseconds=5)),
        ("1d2h3m4s5ms", timedelta(days=1, hours=2, minutes=3, seconds=4, milliseconds=5)),
        (" 1h 30m ", timedelta(hours=1, minutes=30)),
    ],
)
def test_a_duration_is_the_sum_of_its_units(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["1h1h", "30s1m", "5m5m", "1s500ms500ms", "", "h", "5", "5 minutes", "-1s", "1y"])
def test_a_repeated_unit_a_unit_out_of_order_or_no_unit_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration") as refused:
        parse_duration(text)
    assert "each unit once, largest first" in str(refused.value)


def test_an_interval_of_a_repeated_unit_is_refused_not_summed() -> None:
    with pytest.raises(ScheduleError, match="invalid interval '1h1h'"):
        parse_interval("1h1h")
    assert parse_interval("2h") == timedelta(hours=2)
