"""The retry of commands that PostgreSQL aborted as a deadlock's victim (shared/store/deadlocks.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pymongo.errors import OperationFailure

from shared.store.deadlocks import TRIES, retry_deadlocks

DEADLOCK = OperationFailure("deadlock detected", code=1, details={"errmsg": "deadlock detected", "code": 1})


def failing(times: int, error: OperationFailure) -> tuple[list[int], Callable[[], str]]:
    calls: list[int] = []

    def step() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise error
        return "done"

    return calls, step


def test_a_deadlocked_command_is_run_again_until_it_succeeds() -> None:
    calls, step = failing(2, DEADLOCK)
    assert retry_deadlocks(step) == "done"
    assert len(calls) == 3


def test_any_other_failure_is_raised_at_once() -> None:
    other = OperationFailure("E11000 duplicate key", code=11000)
    calls, step = failing(1, other)
    with pytest.raises(OperationFailure, match="duplicate key"):
        retry_deadlocks(step)
    assert len(calls) == 1
    internal = OperationFailure("some other internal error", code=1)
    calls, step = failing(1, internal)
    with pytest.raises(OperationFailure, match="internal error"):
        retry_deadlocks(step)
    assert len(calls) == 1


def test_a_command_that_keeps_deadlocking_fails_after_the_last_try() -> None:
    calls, step = failing(TRIES, DEADLOCK)
    with pytest.raises(OperationFailure, match="deadlock"):
        retry_deadlocks(step)
    assert len(calls) == TRIES
