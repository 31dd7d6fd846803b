from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from shared.cron import Schedule, ScheduleError, parse_interval

ANCHOR = datetime(2024, 1, 1, tzinfo=UTC)
BERLIN = ZoneInfo("Europe/Berlin")


def fires(schedule: Schedule, after: datetime, count: int) -> list[datetime]:
    out = []
    for _ in range(count):
        after = schedule.next_after(after)
        out.append(after)
    return out


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def test_five_field_daily_at_two() -> None:
    s = Schedule.parse(cron="0 2 * * *", anchor=ANCHOR)
    assert s.next_after(utc(2026, 9, 29, 18)) == utc(2026, 9, 30, 2)
    assert s.next_after(utc(2026, 9, 30, 2)) == utc(2026, 10, 1, 2)  # strictly after


def test_month_end_skips_short_months() -> None:
    s = Schedule.parse(cron="0 0 31 * *", anchor=ANCHOR)
    assert fires(s, utc(2026, 1, 31, 1), 3) == [utc(2026, 3, 31), utc(2026, 5, 31), utc(2026, 7, 31)]


def test_leap_day_fires_every_four_years() -> None:
    s = Schedule.parse(cron="0 12 29 2 *", anchor=ANCHOR)
    assert fires(s, utc(2024, 3, 1), 2) == [utc(2028, 2, 29, 12), utc(2032, 2, 29, 12)]


def test_six_fields_have_seconds_first() -> None:
    s = Schedule.parse(cron="*/15 * * * * *", anchor=ANCHOR)
    assert fires(s, utc(2026, 1, 1, 0, 0, 50), 2) == [utc(2026, 1, 1, 0, 1, 0), utc(2026, 1, 1, 0, 1, 15)]


@pytest.mark.parametrize(
    ("macro", "expected"),
    [("@hourly", utc(2026, 5, 5, 11)), ("@daily", utc(2026, 5, 6)), ("@monthly", utc(2026, 6, 1))],
)
def test_macros(macro: str, expected: datetime) -> None:
    assert Schedule.parse(cron=macro, anchor=ANCHOR).next_after(utc(2026, 5, 5, 10, 30)) == expected


def test_timezone_wall_clock() -> None:
    s = Schedule.parse(cron="0 9 * * *", timezone="America/New_York", anchor=ANCHOR)
    assert s.next_after(utc(2026, 1, 10)) == utc(2026, 1, 10, 14)  # EST, UTC-5
    assert s.next_after(utc(2026, 7, 10)) == utc(2026, 7, 10, 13)  # EDT, UTC-4


def test_dst_gap_fires_once_when_the_gap_ends() -> None:
    # 2026-03-29 Europe/Berlin: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist that day.
    s = Schedule.parse(cron="30 2 * * *", timezone="Europe/Berlin", anchor=ANCHOR)
    got = fires(s, utc(2026, 3, 28, 12), 2)
    assert [t.astimezone(BERLIN).strftime("%d %H:%M") for t in got] == ["29 03:00", "30 02:30"]


def test_dst_gap_coalesces_every_time_inside_it() -> None:
    s = Schedule.parse(cron="*/20 * * * *", timezone="Europe/Berlin", anchor=ANCHOR)
    got = fires(s, utc(2026, 3, 29, 0, 30), 4)  # 01:30 CET
    assert [t.astimezone(BERLIN).strftime("%H:%M") for t in got] == ["01:40", "03:00", "03:20", "03:40"]


def test_dst_repeat_fires_each_wall_time_once() -> None:
    # 2026-10-25 Europe/Berlin: 03:00 CEST falls back to 02:00 CET; 02:00-02:59 happen twice.
    s = Schedule.parse(cron="30 2 * * *", timezone="Europe/Berlin", anchor=ANCHOR)
    got = fires(s, utc(2026, 10, 24, 12), 2)
    assert got == [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]  # first 02:30 (CEST), then next day


def test_dst_repeat_hourly_does_not_fire_twice_in_the_repeated_hour() -> None:
    s = Schedule.parse(cron="0 * * * *", timezone="Europe/Berlin", anchor=ANCHOR)
    got = fires(s, utc(2026, 10, 24, 23, 30), 4)
    assert got == [utc(2026, 10, 25, 0), utc(2026, 10, 25, 2), utc(2026, 10, 25, 3), utc(2026, 10, 25, 4)]
    assert len(set(t.astimezone(BERLIN).strftime("%H:%M") for t in got)) == 4


def test_interval_is_anchored_and_does_not_drift() -> None:
    s = Schedule.parse(interval="30s", anchor=utc(2026, 1, 1, 0, 0, 5))
    assert s.next_after(utc(2026, 1, 1, 0, 0, 5)) == utc(2026, 1, 1, 0, 0, 35)
    assert s.next_after(utc(2026, 1, 1, 0, 7, 36)) == utc(2026, 1, 1, 0, 8, 5)
    assert s.latest_at_or_before(utc(2026, 1, 1, 0, 7, 36)) == utc(2026, 1, 1, 0, 7, 35)


def test_latest_at_or_before_picks_the_most_recent_missed_time() -> None:
    s = Schedule.parse(cron="*/5 * * * *", anchor=ANCHOR)
    assert s.latest_at_or_before(utc(2026, 2, 1, 10, 7, 59)) == utc(2026, 2, 1, 10, 5)
    assert s.latest_at_or_before(utc(2026, 2, 1, 10, 5)) == utc(2026, 2, 1, 10, 5)
    assert s.latest_at_or_before(utc(2023, 1, 1)) is None  # before the anchor


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30s", timedelta(seconds=30)),
        ("5m", timedelta(minutes=5)),
        ("1h30m", timedelta(minutes=90)),
        ("2d", timedelta(days=2)),
        ("1500ms", timedelta(milliseconds=1500)),
    ],
)
def test_interval_forms(text: str, expected: timedelta) -> None:
    assert parse_interval(text) == expected


@pytest.mark.parametrize(
    "kwargs",
    [
        {"cron": "61 * * * *"},
        {"cron": "* * * *"},
        {"cron": "* * * * * * *"},
        {"cron": "@reboot"},
        {"cron": "0 0 30 2 *"},  # 30 February never comes
        {"cron": "not a cron"},
        {"interval": "500ms"},
        {"interval": "5 minutes"},
        {"interval": ""},
        {"cron": "0 2 * * *", "timezone": "Mars/Olympus"},
        {"cron": "0 2 * * *", "interval": "5m"},
        {},
    ],
)
def test_invalid_schedules_are_rejected(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ScheduleError):
        Schedule.parse(anchor=ANCHOR, **kwargs)
