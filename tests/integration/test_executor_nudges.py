"""An executor nudges the scheduler when an outcome it records ends a job that others waited for (one of them may
be due now, and would otherwise wait for the next tick), and only then; and announces the room its starts and
ends give a held claim back."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from jobsched.limits import Limits
from services.executor.attempt_runner import AttemptRunner
from shared.bus.memory import MemoryBus
from shared.handlers.builtin import builtin_types
from shared.model import Job, Outcome, Status
from shared.store.sqlite import SqliteJobStore
from tests.contract.store_kit import new, queued, reload, result, running
from tests.executor_support import wakeup_for


def noop_runner(store: SqliteJobStore, **options: Any) -> AttemptRunner:
    return AttemptRunner(
        store,
        MemoryBus(),
        builtin_types(demo=True),
        "noop",
        "w1",
        default_timeout=timedelta(seconds=30),
        lease=timedelta(minutes=1),
        **options,
    )


def test_an_outcome_that_ends_a_parent_nudges_the_scheduler_once(tmp_path: Path) -> None:
    store = SqliteJobStore(tmp_path / "jobs.db")
    store.ensure_schema()
    nudges: list[None] = []
    runner = noop_runner(store, on_dependents=lambda: nudges.append(None))
    try:
        parent, lonely = running(store), running(store)
        child = store.create(new(jobType="child", dependsOn=[parent.id]))
        runner.record(lonely, result(Outcome.SUCCEEDED))
        assert nudges == []
        runner.record(parent, result(Outcome.SUCCEEDED))
        assert nudges == [None]
        assert reload(store, child).status is Status.PENDING
    finally:
        store.close()


def test_room_is_announced_after_runs_started_and_after_runs_ended_only_under_a_concurrency_limit(
    tmp_path: Path,
) -> None:
    """What gives a held claim room again: a start takes a run out of the type's line; an end frees a place only
    where a concurrency limit counts the runs in flight."""
    store = SqliteJobStore(tmp_path / "jobs.db")
    store.ensure_schema()
    announced: list[str] = []

    def runner(limits: Limits) -> AttemptRunner:
        return noop_runner(store, limits=lambda: limits, on_room=lambda: announced.append(str(limits.concurrency)))

    unlimited, limited = runner(Limits()), runner(Limits(concurrency=5))
    try:
        [refused] = unlimited.start_many([wakeup_for(running(store))])  # already running: nothing started
        assert refused is None
        assert announced == []
        [started] = unlimited.start_many([wakeup_for(queued(store))])
        assert isinstance(started, Job)
        assert announced == ["None"]
        unlimited.record(started, result(Outcome.SUCCEEDED))
        assert announced == ["None"]  # an end frees no room without a concurrency limit
        limited.record(running(store), result(Outcome.SUCCEEDED))
        assert announced == ["None", "5"]
    finally:
        store.close()
