"""An executor nudges the scheduler when an outcome it records ends a job that others waited for (one of them may
be due now, and would otherwise wait for the next tick), and only then."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from services.executor.attempt_runner import AttemptRunner
from shared.bus.memory import MemoryBus
from shared.handlers.builtin import builtin_types
from shared.model import Outcome, Status
from shared.store.sqlite import SqliteJobStore
from tests.contract.store_kit import new, reload, result, running


def test_an_outcome_that_ends_a_parent_nudges_the_scheduler_once(tmp_path: Path) -> None:
    store = SqliteJobStore(tmp_path / "jobs.db")
    store.ensure_schema()
    nudges: list[None] = []
    runner = AttemptRunner(
        store,
        MemoryBus(),
        builtin_types(demo=True),
        "noop",
        "w1",
        default_timeout=timedelta(seconds=30),
        lease=timedelta(minutes=1),
        on_dependents=lambda: nudges.append(None),
    )
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
