"""Durations as config and schedules write them: each unit at most once, largest first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.cron import ScheduleError, parse_interval
from shared.durations import parse_duration
from shared.model import Status, job_from_fields
from shared.schedules.spec import TemplateSpec


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


def test_a_duration_stored_by_an_earlier_version_is_read_as_it_was_then() -> None:
    """Templates stored before units had to be unique and in order keep firing after an upgrade."""
    assert parse_duration("1h1h", lenient=True) == timedelta(hours=2)
    assert parse_duration("30s1m", lenient=True) == timedelta(seconds=90)
    assert parse_duration("1h30m", lenient=True) == timedelta(hours=1, minutes=30)
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration("1y", lenient=True)


def test_a_stored_template_of_an_earlier_version_still_fires_but_cannot_be_changed_to_such_a_schedule() -> None:
    created = datetime(2029, 12, 31, 22, tzinfo=UTC)
    stored = job_from_fields(
        {
            "id": "0" * 24,
            "idempotencyKey": "legacy",
            "tenantId": "t",
            "jobType": "noop",
            "payload": {},
            "status": Status.PENDING,
            "interval": "1h1h",
            "jitter": "1s1s",
            "scheduledAt": datetime(2030, 1, 1, tzinfo=UTC),
            "createdAt": created,
            "updatedAt": created,
        }
    )
    spec = TemplateSpec.of(stored)
    assert spec.next_fire(datetime(2030, 1, 1, tzinfo=UTC)) == datetime(2030, 1, 1, 2, tzinfo=UTC)
    assert spec.jitter == timedelta(seconds=2)
    with pytest.raises(ScheduleError, match="1h1h"):
        TemplateSpec.of(stored, lenient=False)
