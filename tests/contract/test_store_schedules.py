"""The store's schedule methods and the schedule engine on top of them, on SQLite and MongoDB.

Races use real threads on separate store instances (as separate leaders or processes would), released
together by a barrier; nothing sleeps.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pytest

from shared.model import Job, Status, run_key, utc_now
from shared.schedules.engine import ScheduleEngine, ScheduleRefused
from shared.schedules.policy import Action
from shared.store import transitions
from shared.store.base import JobStore, NewJob, RunSpec, TransitionRefused
from shared.store.sqlite import SqliteJobStore
from tests.contract.conftest import Harness
from tests.contract.store_kit import claim_one, start, together

T = TypeVar("T")
MINUTE = timedelta(minutes=1)


def at_once(calls: list[Callable[[], T]]) -> list[T]:
    """The calls raced on their own threads (store_kit.together); each must succeed."""
    outcomes = together(calls)
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    assert not failed, failed
    return outcomes  # type: ignore[return-value]


def template(store: JobStore, key: str = "tpl", *, start: datetime | None = None, **policy: Any) -> Job:
    """An every-minute template whose cursor is `start` (a fire time), created an hour before it."""
    start = start or utc_now().replace(second=0, microsecond=0) - 10 * MINUTE
    return store.create(
        NewJob(
            idempotencyKey=key,
            tenantId="t",
            jobType="noop",
            cron="* * * * *",
            timezone="UTC",
            scheduledAt=start,
            createdAt=start - timedelta(hours=1),
            paused=False,
            **policy,
        )
    )


def runs_of(store: JobStore, tpl: Job) -> list[Job]:
    return store.template_runs(tpl.id, None, 1000)


# --- store methods ------------------------------------------------------------------------------------------


def test_add_run_inserts_once_per_key_and_returns_the_existing_run(store: JobStore) -> None:
    tpl = template(store, payload={"a": 1})
    planned = tpl.scheduledAt
    first, created = store.add_run(tpl, RunSpec(planned, scheduledAt=planned + timedelta(seconds=7)))
    assert created
    assert (first.idempotencyKey, first.templateId, first.payload) == (run_key("tpl", planned), tpl.id, {"a": 1})
    assert (first.plannedAt, first.scheduledAt, first.status) == (
        planned,
        planned + timedelta(seconds=7),
        Status.PENDING,
    )
    again, created = store.add_run(tpl, RunSpec(planned))
    assert (again.id, created) == (first.id, False)
    other, created = store.add_run(tpl, RunSpec(planned, key="tpl-trigger-x", payload={"b": 2}))
    assert created
    assert other.payload == {"b": 2}
    assert other.id != first.id


def test_concurrent_add_run_of_one_fire_time_makes_one_run(harness: Harness) -> None:
    tpl = template(harness.store)
    stores = [harness.open() for _ in range(2)]
    results = at_once([partial(s.add_run, tpl, RunSpec(tpl.scheduledAt)) for s in stores for _ in range(4)])
    assert sum(created for _, created in results) == 1
    assert len({run.id for run, _ in results}) == 1
    assert len(runs_of(harness.store, tpl)) == 1


def test_buffered_runs_are_never_claimed_until_promoted(store: JobStore) -> None:
    tpl = template(store)
    run, _ = store.add_run(tpl, RunSpec(tpl.scheduledAt, status=Status.BUFFERED))
    now = utc_now()
    assert store.claim_due_jobs(now, 10, ["noop"]) == []
    assert [r.id for r in store.buffered_runs(10)] == [run.id]
    assert store.promote_buffered(run, now) is True
    assert store.promote_buffered(run, now) is False  # not buffered any more
    promoted = store.get(run.id)
    assert promoted is not None
    assert (promoted.status, promoted.scheduledAt) == (Status.PENDING, now)
    assert [j.id for j in store.claim_due_jobs(now, 10, ["noop"])] == [run.id]


def test_a_buffered_run_can_be_cancelled_and_then_not_promoted(store: JobStore) -> None:
    tpl = template(store)
    run, _ = store.add_run(tpl, RunSpec(tpl.scheduledAt, status=Status.BUFFERED))
    assert store.cancel(run.id).status is Status.CANCELLED
    assert store.promote_buffered(run, utc_now()) is False
    assert store.buffered_runs(10) == []


def test_template_runs_newest_planned_first_with_a_status_filter(store: JobStore) -> None:
    tpl = template(store)
    times = [tpl.scheduledAt + i * MINUTE for i in range(3)]
    ids = [store.add_run(tpl, RunSpec(t))[0].id for t in times]
    store.cancel(ids[1])
    assert [r.id for r in runs_of(store, tpl)] == ids[::-1]
    assert [r.id for r in store.template_runs(tpl.id, [Status.PENDING], 10)] == [ids[2], ids[0]]
    assert [r.id for r in store.template_runs(tpl.id, None, 1)] == [ids[2]]
    assert store.template_runs("0" * 24, None, 10) == []


def test_template_runs_page_after_a_run_in_the_same_order(store: JobStore) -> None:
    """Pages read after the previous page's last run are the whole listing, ties of plannedAt (jitter) and of
    scheduledAt (keys given) included, and runs without plannedAt (written before it existed) last."""
    tpl = template(store)
    base = tpl.scheduledAt
    specs = [RunSpec(base + i * MINUTE) for i in range(4)]
    specs += [RunSpec(base + MINUTE, key=f"tie-{i}", scheduledAt=base + MINUTE + i * MINUTE) for i in range(3)]
    specs += [RunSpec(base + 2 * MINUTE, key=f"same-{i}") for i in range(3)]
    for spec in specs:
        store.add_run(tpl, spec)
    for legacy in runs_of(store, tpl)[-2:]:  # two runs as an older version wrote them: no plannedAt
        store.update_if_unmoved(legacy, {"plannedAt": transitions.UNSET})
    whole = runs_of(store, tpl)
    assert len(whole) == len(specs)
    assert [r.plannedAt is None for r in whole] == [False] * (len(specs) - 2) + [True, True]
    for size in (1, 2, 3):
        paged: list[Job] = []
        while page := store.template_runs(tpl.id, None, size, paged[-1] if paged else None):
            paged += page
        assert [r.id for r in paged] == [r.id for r in whole], size
    pending = store.template_runs(tpl.id, [Status.PENDING], 2, whole[3])
    assert [r.id for r in pending] == [r.id for r in whole[4:6]]


def test_update_if_unmoved_is_a_compare_and_set_on_the_cursor(store: JobStore) -> None:
    tpl = template(store)
    moved = store.update_if_unmoved(
        tpl, transitions.template_fired(tpl.scheduledAt, tpl.scheduledAt + MINUTE, 4, utc_now())
    )
    assert moved is not None
    assert (moved.scheduledAt, moved.lastFiredAt, moved.remainingRuns) == (tpl.scheduledAt + MINUTE, tpl.scheduledAt, 4)
    assert store.update_if_unmoved(tpl, {"priority": 9}) is None  # read before the move: stale
    ended = store.update_if_unmoved(moved, transitions.template_rescheduled(None, utc_now()))
    assert ended is not None
    assert ended.status is Status.COMPLETED
    assert store.update_if_unmoved(ended, {"priority": 9}) is None  # not pending


def test_paused_templates_are_not_due(store: JobStore) -> None:
    tpl = template(store)
    now = utc_now()
    assert [t.id for t in store.due_templates(now, 10)] == [tpl.id]
    paused = store.update_if_unmoved(tpl, transitions.template_paused("maintenance", now))
    assert paused is not None
    assert (paused.paused, paused.pauseNote, paused.pausedAt) == (True, "maintenance", now)
    assert store.due_templates(now, 10) == []
    resumed = store.update_if_unmoved(paused, transitions.template_resumed(now + MINUTE, now))
    assert resumed is not None
    assert (resumed.paused, resumed.pauseNote, resumed.pausedAt) == (False, None, None)
    assert [t.id for t in store.due_templates(now + MINUTE, 10)] == [tpl.id]


def test_cancel_of_a_run_cancels_what_has_not_started_and_flags_what_runs(store: JobStore) -> None:
    tpl = template(store)
    waiting, _ = store.add_run(tpl, RunSpec(tpl.scheduledAt))
    assert store.cancel(waiting.id).status is Status.CANCELLED
    started, _ = store.add_run(tpl, RunSpec(tpl.scheduledAt + MINUTE))
    running = start(store, claim_one(store, started))
    flagged = store.cancel(started.id)
    assert (flagged.status, flagged.cancelRequested) == (Status.RUNNING, True)
    assert running.cancelRequested is None
    store.cancel(store.add_run(tpl, RunSpec(tpl.scheduledAt + 2 * MINUTE))[0].id)
    with pytest.raises(TransitionRefused):
        store.cancel(store.template_runs(tpl.id, [Status.CANCELLED], 1)[0].id)


def test_sqlite_database_from_before_the_schedule_columns_gets_them(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:  # the jobs table as the first release created it
        conn.execute(
            """CREATE TABLE jobs (id TEXT PRIMARY KEY, idempotencyKey TEXT NOT NULL UNIQUE, tenantId TEXT NOT NULL,
            jobType TEXT NOT NULL, kind TEXT NOT NULL, status TEXT NOT NULL, scheduledAt INTEGER NOT NULL,
            createdAt INTEGER NOT NULL, updatedAt INTEGER NOT NULL, payload TEXT NOT NULL DEFAULT '{}',
            priority INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0,
            maxAttempts INTEGER NOT NULL DEFAULT 3, attemptBase INTEGER NOT NULL DEFAULT 0, timeoutSeconds REAL,
            cron TEXT, interval TEXT, timezone TEXT, templateId TEXT, lastError TEXT, claimedBy TEXT,
            claimedAt INTEGER, queuedAt INTEGER, leaseExpiresAt INTEGER)"""
        )
    conn.close()
    store = SqliteJobStore(path)
    try:
        store.ensure_schema()
        tpl = template(store, overlap="skip")
        assert store.get(tpl.id).overlap == "skip"  # type: ignore[union-attr]
    finally:
        store.close()


# --- the engine on the store --------------------------------------------------------------------------------


def test_skip_spawns_nothing_while_a_run_is_not_final(store: JobStore) -> None:
    tpl = template(store, overlap="skip")
    engine = ScheduleEngine(store)
    now = tpl.scheduledAt + timedelta(seconds=1)
    assert engine.fire_due(tpl, now)[Action.SPAWNED] == 1
    tpl = store.get(tpl.id)  # type: ignore[assignment]
    later = tpl.scheduledAt + timedelta(seconds=1)
    assert engine.fire_due(tpl, later) == {Action.SKIPPED: 1, Action.MISSED: 0}
    assert len(runs_of(store, tpl)) == 1
    with pytest.raises(ScheduleRefused, match=runs_of(store, tpl)[0].id):
        engine.trigger(tpl, later)


def test_buffer_all_runs_every_time_one_after_another(store: JobStore) -> None:
    tpl = template(store, overlap="buffer_all", catchup="all")
    engine = ScheduleEngine(store)
    now = tpl.scheduledAt + 3 * MINUTE + timedelta(seconds=1)  # four fire times due
    assert engine.fire_due(tpl, now) == {Action.SPAWNED: 1, Action.BUFFERED: 3, Action.MISSED: 0}
    order = sorted(runs_of(store, tpl), key=lambda r: r.plannedAt or r.scheduledAt)
    assert [r.status for r in order] == [Status.PENDING] + [Status.BUFFERED] * 3
    for i in range(1, 4):
        assert engine.start_buffered(now) == 0  # the previous run is not final yet
        store.cancel(order[i - 1].id)  # final
        assert engine.start_buffered(now) == 1
        assert store.get(order[i].id).status is Status.PENDING  # type: ignore[union-attr]
    stored = store.get(tpl.id)
    assert stored is not None
    assert stored.lastFiredAt == tpl.scheduledAt + 3 * MINUTE


def test_remaining_runs_count_down_and_end_the_template(store: JobStore) -> None:
    tpl = template(store, remainingRuns=2, catchup="all")
    ScheduleEngine(store).fire_due(tpl, tpl.scheduledAt + 5 * MINUTE)
    stored = store.get(tpl.id)
    assert stored is not None
    assert (stored.status, stored.remainingRuns) == (Status.COMPLETED, 0)
    assert len(runs_of(store, tpl)) == 2


def test_pause_on_failure_pauses_before_the_next_fire_time(harness: Harness) -> None:
    store = harness.store
    tpl = template(store, pauseOnFailure=True)
    engine = ScheduleEngine(store)
    engine.fire_due(tpl, tpl.scheduledAt + timedelta(seconds=1))
    [run] = runs_of(store, tpl)
    harness.force_status(run.id, Status.DLQ)
    tpl = store.get(tpl.id)  # type: ignore[assignment]
    assert engine.fire_due(tpl, tpl.scheduledAt + timedelta(seconds=1)) == {}
    paused = store.get(tpl.id)
    assert paused is not None
    assert paused.paused is True
    assert paused.pauseNote is not None
    assert run.id in paused.pauseNote
    assert len(runs_of(store, tpl)) == 1
    resumed = engine.resume(paused, utc_now())
    assert resumed.paused is False
    assert resumed.scheduledAt > utc_now() - MINUTE


def test_backfill_spawns_each_fire_time_once_across_repeats(store: JobStore) -> None:
    tpl = template(store)
    engine = ScheduleEngine(store)
    start = tpl.scheduledAt - 60 * MINUTE
    first = engine.backfill(tpl, start, start + 5 * MINUTE)
    assert (first.spawned, first.existing, first.skipped) == (5, 0, 0)
    overlapping = engine.backfill(tpl, start + 3 * MINUTE, start + 8 * MINUTE)
    assert (overlapping.spawned, overlapping.existing) == (3, 2)
    keys = {r.idempotencyKey for r in runs_of(store, tpl)}
    assert keys == {run_key("tpl", start + i * MINUTE) for i in range(8)}


def test_two_leaders_catching_up_at_once_spawn_one_run_per_fire_time(harness: Harness) -> None:
    tpl = template(harness.store, overlap="buffer_all", catchup="all")
    engines = [ScheduleEngine(harness.open()) for _ in range(2)]
    now = tpl.scheduledAt + 9 * MINUTE + timedelta(seconds=1)  # a 10-minute outage: 10 fire times
    for _ in range(3):  # each leader also retries, as after a crash between the runs and the advance
        at_once([partial(e.fire_due, tpl, now) for e in engines])
    runs = runs_of(harness.store, tpl)
    planned = [r.plannedAt for r in runs]
    assert sorted(planned) == [tpl.scheduledAt + i * MINUTE for i in range(10)]  # type: ignore[type-var]
    assert sum(r.status is Status.PENDING for r in runs) == 1  # one runs, the rest wait their turn
    at_once([partial(e.start_buffered, now) for e in engines])
    assert sum(r.status is Status.PENDING for r in runs_of(harness.store, tpl)) == 1  # the first is not final


def test_the_buffered_runs_of_a_cancelled_template_are_cancelled(store: JobStore) -> None:
    tpl = template(store, overlap="buffer_all", catchup="all")
    engine = ScheduleEngine(store)
    engine.fire_due(tpl, tpl.scheduledAt + 2 * MINUTE + timedelta(seconds=1))
    store.cancel(tpl.id)
    engine.start_buffered(utc_now())
    assert sorted(r.status for r in runs_of(store, tpl)) == [Status.CANCELLED, Status.CANCELLED, Status.PENDING]
