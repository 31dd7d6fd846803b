"""The retry of commands that PostgreSQL aborted as a deadlock's victim (shared/store/deadlocks.py)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from pymongo.errors import OperationFailure, WriteError

from shared.store.deadlocks import MAX_PAUSE_S, TRIES, is_deadlock_answer, key_lock, retry_deadlocks

DEADLOCK = OperationFailure("deadlock detected", code=1, details={"errmsg": "deadlock detected", "code": 1})


@pytest.fixture(autouse=True)
def pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The pauses between tries, recorded instead of slept."""
    taken: list[float] = []
    monkeypatch.setattr(time, "sleep", taken.append)
    return taken


def failing(times: int, error: OperationFailure) -> tuple[list[int], Callable[[], str]]:
    calls: list[int] = []

    def step() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise error
        return "done"

    return calls, step


def test_a_deadlocked_command_is_run_again_until_it_succeeds(pauses: list[float]) -> None:
    calls, step = failing(2, DEADLOCK)
    assert retry_deadlocks(step) == "done"
    assert len(calls) == 3
    assert len(pauses) == 2


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


def test_a_command_that_keeps_deadlocking_fails_after_the_last_try(pauses: list[float]) -> None:
    calls, step = failing(TRIES, DEADLOCK)
    with pytest.raises(OperationFailure, match="deadlock"):
        retry_deadlocks(step)
    assert len(calls) == TRIES
    assert len(pauses) == TRIES - 1
    assert all(0 <= pause <= MAX_PAUSE_S for pause in pauses)


def test_the_check_before_a_retry_can_end_the_retries() -> None:
    calls, step = failing(1, DEADLOCK)
    checks: list[int] = []

    def key_taken() -> None:
        checks.append(1)
        raise LookupError("another create holds the key")

    with pytest.raises(LookupError, match="holds the key"):
        retry_deadlocks(step, before_retry=key_taken)
    assert (len(calls), len(checks)) == (1, 1)


def test_creates_of_one_key_hold_one_lock_while_they_run() -> None:
    lock = key_lock("acme", "invoice-7")
    assert key_lock("acme", "invoice-7") is lock
    with key_lock("acme", "invoice-7"):
        assert lock.locked()
    assert not lock.locked()
    # Locks are shared between keys only by chance (1 in KEY_STRIPES for two keys).
    assert len({id(key_lock("acme", f"k{n}")) for n in range(8)}) > 1


def test_an_updates_write_error_with_postgresqls_own_deadlock_code_is_run_again(pauses: list[float]) -> None:
    """DocumentDB answers an update that lost a deadlock with PostgreSQL's code for it (SQLSTATE 40P01, packed):
    the WriteError a racing workflow create met in CI."""
    packed = WriteError("deadlock detected", code=16908292, details={"errmsg": "deadlock detected", "code": 16908292})
    calls, step = failing(2, packed)
    assert retry_deadlocks(step) == "done"
    assert len(calls) == 3
    assert is_deadlock_answer(16908292, "deadlock detected")
    assert not is_deadlock_answer(16908292, "duplicate key")
    assert not is_deadlock_answer(11000, "deadlock detected")
