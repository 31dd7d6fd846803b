"""GroupCommit: concurrent submissions become batches; every caller gets its own result or exception."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

from shared.store import group_commit
from shared.store.group_commit import GATHER_TURNS, GroupCommit
from tests.support import wait_until

CALLERS = 32


def test_a_lone_call_is_a_batch_of_one() -> None:
    batches: list[list[int]] = []

    def double(requests: Sequence[int]) -> list[int | BaseException]:
        batches.append(list(requests))
        return [r * 2 for r in requests]

    commit: GroupCommit[int, int] = GroupCommit(double)
    assert [commit.submit(n) for n in (1, 2, 3)] == [2, 4, 6]
    assert batches == [[1], [2], [3]]


def test_concurrent_calls_are_batched_and_each_gets_its_own_result() -> None:
    first_batch_running = threading.Event()
    release_first_batch = threading.Event()
    batches: list[list[int]] = []

    def square(requests: Sequence[int]) -> list[int | BaseException]:
        batches.append(list(requests))
        if len(batches) == 1:  # hold the first batch until everyone else has queued behind it
            first_batch_running.set()
            release_first_batch.wait(30)
        return [r * r for r in requests]

    commit: GroupCommit[int, int] = GroupCommit(square, max_batch=10)
    with ThreadPoolExecutor(CALLERS + 1) as pool:
        first = pool.submit(commit.submit, 0)
        assert first_batch_running.wait(30)
        queued = threading.Barrier(CALLERS + 1)

        def call(n: int) -> int:
            queued.wait(30)
            return commit.submit(n)

        futures = [pool.submit(call, n) for n in range(1, CALLERS + 1)]
        queued.wait(30)
        # every caller is now inside submit or about to be; give the batch back once all have queued
        wait_until(lambda: len(commit._queue) == CALLERS, 30, "every caller queued behind the first batch")
        release_first_batch.set()
        assert first.result(30) == 0
        assert [f.result(30) for f in futures] == [n * n for n in range(1, CALLERS + 1)]
    assert batches[0] == [0]
    assert sorted(n for batch in batches[1:] for n in batch) == list(range(1, CALLERS + 1))
    assert max(len(b) for b in batches[1:]) == 10  # capped at max_batch, and really batched
    assert len(batches) == 1 + CALLERS // 10 + 1


def test_per_request_exceptions_reach_only_their_caller_and_a_failed_batch_reaches_all() -> None:
    def check(requests: Sequence[int]) -> list[int | BaseException]:
        if 13 in requests:
            raise RuntimeError("batch broke")
        return [ValueError(f"bad {r}") if r < 0 else r for r in requests]

    commit: GroupCommit[int, int] = GroupCommit(check)
    assert commit.submit(5) == 5
    with pytest.raises(ValueError, match="bad -1"):
        commit.submit(-1)
    with pytest.raises(RuntimeError, match="batch broke"):
        commit.submit(13)
    assert commit.submit(6) == 6  # a failed batch leaves the committer usable


def test_a_batch_function_returning_the_wrong_number_of_results_fails_its_callers() -> None:
    commit: GroupCommit[int, int] = GroupCommit(lambda requests: [])
    with pytest.raises(RuntimeError, match="0 results for 1 requests"):
        commit.submit(1)


def test_a_lone_later_call_is_written_by_its_caller_before_it_returns() -> None:
    got: list[tuple[int | BaseException, threading.Thread]] = []
    commit: GroupCommit[int, int] = GroupCommit(lambda requests: [r + 1 for r in requests])
    commit.submit_later(1, lambda result: got.append((result, threading.current_thread())))
    assert got == [(2, threading.current_thread())]


def test_later_calls_queued_behind_a_batch_are_written_by_its_writer_without_their_callers_waiting() -> None:
    first_batch_running = threading.Event()
    release_first_batch = threading.Event()
    batches: list[list[int]] = []
    results: dict[int, tuple[int | BaseException, threading.Thread]] = {}

    def negate(requests: Sequence[int]) -> list[int | BaseException]:
        batches.append(list(requests))
        if len(batches) == 1:
            first_batch_running.set()
            release_first_batch.wait(30)
        return [ValueError("odd") if r == 7 else -r for r in requests]

    commit: GroupCommit[int, int] = GroupCommit(negate)

    def note(n: int, result: int | BaseException) -> None:
        results[n] = (result, threading.current_thread())
        if n == 3:
            raise RuntimeError("a callback's bug")  # must not cost the others their results

    writer = threading.Thread(target=commit.submit_later, args=(0, lambda r: note(0, r)))
    writer.start()
    assert first_batch_running.wait(30)
    for n in range(1, 11):
        commit.submit_later(n, lambda r, n=n: note(n, r))  # type: ignore[misc]  # returns at once: a batch is in flight
    assert sorted(results) == []
    release_first_batch.set()
    writer.join(30)
    assert sorted(results) == list(range(11))
    assert all(thread is writer for _, thread in results.values())
    assert isinstance(results[7][0], ValueError)
    assert [results[n][0] for n in (1, 2, 3, 10)] == [-1, -2, -3, -10]
    assert batches == [[0], list(range(1, 11))]


def test_a_waiting_caller_takes_over_from_a_later_calls_writer() -> None:
    first_batch_running = threading.Event()
    release_first_batch = threading.Event()
    writers: list[threading.Thread] = []

    def record(requests: Sequence[int]) -> list[int | BaseException]:
        writers.append(threading.current_thread())
        if len(writers) == 1:
            first_batch_running.set()
            release_first_batch.wait(30)
        return list(requests)

    commit: GroupCommit[int, int] = GroupCommit(record)
    later = threading.Thread(target=commit.submit_later, args=(0, lambda r: None))
    later.start()
    assert first_batch_running.wait(30)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(commit.submit, 1)
        wait_until(lambda: len(commit._queue) == 1, 30, "the caller queued behind the batch")
        release_first_batch.set()
        assert waiting.result(30) == 1
    later.join(30)
    assert writers[0] is later
    assert writers[1] is not later  # the waiting caller wrote its own batch


@pytest.mark.parametrize("arriving", [0, 2, GATHER_TURNS + 3])
def test_a_gathering_batch_takes_what_queues_while_it_yields_and_stops_when_nothing_more_comes(
    monkeypatch: pytest.MonkeyPatch, arriving: int
) -> None:
    """The threads that queue while the leader yields are those the interpreter ran meanwhile: here each yield
    lets one more request in, until `arriving` have, so the batch's size does not depend on the OS's timing."""
    batches: list[list[int]] = []

    def write(requests: Sequence[int]) -> list[int | BaseException]:
        batches.append(list(requests))
        return list(requests)

    commit: GroupCommit[int, int] = GroupCommit(write, gathers=True)
    yields: list[int] = []

    def one_arrives_per_yield(seconds: float) -> None:
        yields.append(len(commit._queue))
        if len(yields) <= arriving:
            commit.submit_later(len(yields), lambda result: None)  # queued behind the batch being gathered

    monkeypatch.setattr(group_commit, "time", SimpleNamespace(sleep=one_arrives_per_yield))
    commit.submit_later(0, lambda result: None)
    gathered = min(arriving, GATHER_TURNS)
    assert batches[0] == list(range(gathered + 1))
    assert len(yields) == min(arriving + 1, GATHER_TURNS)  # a yield that brought nothing ends the gathering
    assert batches == [list(range(gathered + 1))]  # at most GATHER_TURNS yields: no more arrived


def test_a_batch_that_does_not_gather_never_yields(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(group_commit, "time", SimpleNamespace(sleep=lambda seconds: pytest.fail("yielded")))
    commit: GroupCommit[int, int] = GroupCommit(lambda rs: list(rs))
    assert commit.submit(4) == 4
