"""RETAIN_COMPLETED, RETAIN_CANCELLED and RETAIN_DLQ: the defaults a user expects, a duration, or forever."""

from __future__ import annotations

from datetime import timedelta

import pytest

from services.reaper.retention import Retention
from shared.config import ConfigError, Settings
from shared.model import Status


def test_defaults_keep_a_week_of_finished_jobs_and_a_month_of_dead_letters() -> None:
    kept = Retention.from_settings(Settings.from_env({}))
    assert kept.ages() == {
        Status.COMPLETED: timedelta(days=7),
        Status.CANCELLED: timedelta(days=7),
        Status.DLQ: timedelta(days=30),
    }


def test_a_duration_or_forever() -> None:
    settings = Settings.from_env({"RETAIN_COMPLETED": "12h", "RETAIN_CANCELLED": "forever", "RETAIN_DLQ": "FOREVER"})
    assert Retention.from_settings(settings).ages() == {Status.COMPLETED: timedelta(hours=12)}


@pytest.mark.parametrize("raw", ["0", "-1h", "soon"])
def test_anything_else_is_refused_by_name(raw: str) -> None:
    with pytest.raises(ConfigError, match="RETAIN_DLQ"):
        Settings.from_env({"RETAIN_DLQ": raw})
