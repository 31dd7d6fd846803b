"""The schedule policies as pure functions: overlap decisions, catch-up, bounds, runs left, jitter, DST."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.cron import ScheduleError
from shared.model import Status, TemplatePolicy
from shared.schedules.policy import (
    Action,
    ActiveRun,
    Catchup,
    Decision,
    Overlap,
    decide_overlap,
    limit_runs,
)
from shared.schedules.spec import ON_TIME_GRACE, RUNS_PER_TICK, TemplateSpec

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
RUNNING = ActiveRun("r1", Status.RUNNING)
WAITING = ActiveRun("b1", Status.BUFFERED)


def times(n: int, start: datetime = T0) -> list[datetime]:
    return [start + i * MINUTE for i in range(n)]


def actions(overlap: Overlap, n: int, active: list[ActiveRun]) -> list[Action]:
    return [d.action for d in decide_overlap(overlap, times(n), active).decisions]


# --- overlap ------------------------------------------------------------------------------------------------


def test_nothing_active_every_policy_spawns_the_first_time() -> None:
    for overlap in Overlap:
        assert actions(overlap, 1, []) == [Action.SPAWNED], overlap


def test_allow_all_spawns_every_time_whatever_runs() -> None:
    assert actions(Overlap.ALLOW_ALL, 3, [RUNNING]) == [Action.SPAWNED] * 3


def test_skip_refuses_while_a_run_is_not_final_and_names_it() -> None:
    plan = decide_overlap(Overlap.SKIP, times(2), [RUNNING])
    assert [d.action for d in plan.decisions] == [Action.SKIPPED, Action.SKIPPED]
    assert plan.blocking == "r1"
    # Times of one plan count the runs it spawns: only the first of two free times runs.
    assert actions(Overlap.SKIP, 2, []) == [Action.SPAWNED, Action.SKIPPED]


def test_buffer_one_keeps_at_most_one_waiting_run() -> None:
    assert actions(Overlap.BUFFER_ONE, 3, [RUNNING]) == [Action.BUFFERED, Action.SKIPPED, Action.SKIPPED]
    assert actions(Overlap.BUFFER_ONE, 1, [RUNNING, WAITING]) == [Action.SKIPPED]
    assert actions(Overlap.BUFFER_ONE, 3, []) == [Action.SPAWNED, Action.BUFFERED, Action.SKIPPED]


def test_buffer_all_queues_every_time() -> None:
    assert actions(Overlap.BUFFER_ALL, 3, [RUNNING, WAITING]) == [Action.BUFFERED] * 3
    assert actions(Overlap.BUFFER_ALL, 3, []) == [Action.SPAWNED, Action.BUFFERED, Action.BUFFERED]


def test_cancel_other_cancels_the_earlier_runs_and_waits_for_them() -> None:
    plan = decide_overlap(Overlap.CANCEL_OTHER, times(1), [RUNNING, WAITING])
    assert plan.cancel == ["r1", "b1"]
    assert [d.action for d in plan.decisions] == [Action.BUFFERED]


def test_cancel_other_lets_only_the_last_of_several_times_run() -> None:
    plan = decide_overlap(Overlap.CANCEL_OTHER, times(3), [])
    assert [d.action for d in plan.decisions] == [Action.SKIPPED, Action.SKIPPED, Action.SPAWNED]
    assert plan.cancel == []  # the superseded runs of this plan were never written
    plan = decide_overlap(Overlap.CANCEL_OTHER, times(2), [RUNNING])
    assert [d.action for d in plan.decisions] == [Action.SKIPPED, Action.BUFFERED]
    assert plan.cancel == ["r1"]


def test_limit_runs_stops_at_the_last_run_left() -> None:
    decisions = [Decision(t, Action.SPAWNED) for t in times(3)]
    assert limit_runs(decisions, None) == (decisions, False)
    assert limit_runs(decisions, 2) == (decisions[:2], True)
    assert limit_runs(decisions, 5) == (decisions, False)
    skipped_first = [Decision(T0, Action.SKIPPED), *decisions[1:]]
    assert limit_runs(skipped_first, 1) == (skipped_first[:2], True)  # a skipped time uses no run


# --- catch-up -------------------------------------------------------------------------------------------------


def every_minute(**policy: Any) -> TemplateSpec:
    return TemplateSpec.build(
        cron="* * * * *",
        interval=None,
        timezone=None,
        created_at=T0 - timedelta(hours=1),
        policy=TemplatePolicy(**policy),
    )


def test_a_fire_time_on_time_runs_under_every_catchup_policy() -> None:
    for catchup in Catchup:
        due = every_minute(catchup=catchup.value).due(T0, T0 + timedelta(seconds=1))
        assert (due.run, due.missed, due.handled_until, due.next_at) == ([T0], 0, T0, T0 + MINUTE), catchup


def test_catchup_after_a_ten_minute_outage() -> None:
    now = T0 + timedelta(minutes=10, seconds=20)  # fire times T0 .. T0+10m passed: 11 of them
    latest = every_minute(catchup="latest").due(T0, now)
    assert (latest.run, latest.missed) == ([T0 + 10 * MINUTE], 10)
    everything = every_minute(catchup="all").due(T0, now)
    assert (everything.run, everything.missed) == (times(11), 0)
    assert everything.next_at == T0 + 11 * MINUTE
    windowed = every_minute(catchup="all", catchupWindow="5m").due(T0, now)
    assert windowed.run == times(5, T0 + 6 * MINUTE)  # 12:05 is 5m20s old: outside the window
    assert windowed.missed == 6
    none = every_minute(catchup="none").due(T0, T0 + 10 * MINUTE + ON_TIME_GRACE + timedelta(seconds=1))
    assert (none.run, none.missed, none.handled_until) == ([], 11, T0 + 10 * MINUTE)


def test_catchup_none_still_runs_a_time_handled_within_the_grace() -> None:
    due = every_minute(catchup="none").due(T0, T0 + 10 * MINUTE + timedelta(seconds=5))
    assert (due.run, due.missed) == ([T0 + 10 * MINUTE], 10)


def test_catchup_window_also_bounds_latest() -> None:
    due = every_minute(catchup="latest", catchupWindow="30s").due(T0, T0 + timedelta(minutes=3, seconds=45))
    assert (due.run, due.missed) == ([], 4)


def test_catchup_all_spawns_a_bounded_number_per_tick_and_continues() -> None:
    spec = TemplateSpec.build(
        cron=None, interval="1s", timezone=None, created_at=T0, policy=TemplatePolicy(catchup="all")
    )
    now = T0 + timedelta(seconds=RUNS_PER_TICK * 3)
    first = spec.due(T0 + timedelta(seconds=1), now)
    assert len(first.run) == RUNS_PER_TICK
    assert first.next_at == first.run[-1] + timedelta(seconds=1)
    assert first.handled_until == first.run[-1]
    assert first.next_at is not None
    second = spec.due(first.next_at, now)
    assert second.run[0] == first.next_at


# --- bounds and runs left -----------------------------------------------------------------------------------


def test_start_and_end_bound_the_fire_times() -> None:
    spec = every_minute(startAt=T0 + 5 * MINUTE, endAt=T0 + 8 * MINUTE)
    assert spec.next_fire(T0) == T0 + 5 * MINUTE
    assert spec.upcoming(T0, 10) == times(3, T0 + 5 * MINUTE)
    assert spec.next_fire(T0 + 7 * MINUTE) is None
    due = spec.due(T0 + 7 * MINUTE, T0 + 20 * MINUTE)
    assert (due.run, due.next_at, due.ended) == ([T0 + 7 * MINUTE], None, True)


def test_an_interval_counts_from_start_at() -> None:
    spec = TemplateSpec.build(
        cron=None,
        interval="1h",
        timezone=None,
        created_at=T0,
        policy=TemplatePolicy(startAt=T0 + timedelta(minutes=17)),
    )
    assert spec.upcoming(T0, 2) == [T0 + timedelta(minutes=17), T0 + timedelta(hours=1, minutes=17)]


def test_remaining_runs_limit_upcoming_and_zero_ends() -> None:
    assert every_minute(remainingRuns=2).upcoming(T0, 10) == times(2)
    assert every_minute(remainingRuns=0).next_fire(T0) is None
    assert every_minute(remainingRuns=0).due(T0, T0 + MINUTE).ended


def test_invalid_policies_are_refused_with_the_reason() -> None:
    with pytest.raises(ScheduleError, match="endAt must be after startAt"):
        every_minute(startAt=T0, endAt=T0)
    with pytest.raises(ScheduleError, match="jitter"):
        every_minute(jitter="soon")
    with pytest.raises(ScheduleError, match="catchupWindow"):
        every_minute(catchupWindow="0s")
    with pytest.raises(ScheduleError):
        every_minute(overlap="sometimes")


def test_backfill_range_lists_fire_times_and_refuses_huge_ranges() -> None:
    spec = every_minute()
    assert spec.between(T0, T0 + 3 * MINUTE, 10) == times(3)  # [from, to)
    with pytest.raises(ScheduleError, match="more than 10"):
        spec.between(T0, T0 + 11 * MINUTE, 10)


# --- jitter and DST -----------------------------------------------------------------------------------------


def test_jitter_is_deterministic_per_run_and_inside_the_range() -> None:
    spec = every_minute(jitter="30s")
    offsets = {spec.run_at(f"k-run-{i}", T0) - T0 for i in range(200)}
    assert all(timedelta(0) <= o < timedelta(seconds=30) for o in offsets)
    assert len(offsets) > 100  # spread, not one value
    assert spec.run_at("k-run-1", T0) == spec.run_at("k-run-1", T0)
    assert every_minute().run_at("k-run-1", T0) == T0


def test_upcoming_follows_the_daylight_saving_rules() -> None:
    spec = TemplateSpec.build(
        cron="30 2 * * *", interval=None, timezone="Europe/Berlin", created_at=datetime(2026, 3, 27, 12, tzinfo=UTC)
    )
    first = spec.next_fire(datetime(2026, 3, 27, 12, tzinfo=UTC))
    assert first is not None
    fires = spec.upcoming(first, 3)
    # 28 March 02:30 CET; 29 March 02:30 does not exist: 03:00 CEST (01:00Z); 30 March 02:30 CEST.
    assert fires == [
        datetime(2026, 3, 28, 1, 30, tzinfo=UTC),
        datetime(2026, 3, 29, 1, 0, tzinfo=UTC),
        datetime(2026, 3, 30, 0, 30, tzinfo=UTC),
    ]
    autumn = TemplateSpec.build(
        cron="30 2 * * *", interval=None, timezone="Europe/Berlin", created_at=datetime(2026, 10, 24, tzinfo=UTC)
    )
    start = autumn.next_fire(datetime(2026, 10, 24, 12, tzinfo=UTC))
    assert start is not None
    # 25 October 02:30 happens twice: it fires once, at the first (CEST, 00:30Z).
    assert autumn.upcoming(start, 2) == [
        datetime(2026, 10, 25, 0, 30, tzinfo=UTC),
        datetime(2026, 10, 26, 1, 30, tzinfo=UTC),
    ]
