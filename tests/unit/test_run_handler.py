"""run_handler for plain functions and the handler threads: reused, and a hung handler abandoned at its deadline."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime

import pytest

from jobsched import HandlerContext, Payload
from jobsched.handlers import JobLogger
from services.executor.handler_calls import Cancellation, Ending, HandlerThreads, Task, run_handler
from shared.model import Outcome
from tests.support import wait_until

WHEN = datetime(2030, 1, 1, tzinfo=UTC)
NOT_CANCELLED = Cancellation()
CTX = HandlerContext(
    job_id="j",
    job_type="t",
    attempt=1,
    deadline=WHEN,
    tenant_id="tenant",
    scheduled_at=WHEN,
    logger=JobLogger(logging.getLogger("test"), {}),
    cancelled=NOT_CANCELLED.event,
)


def test_calls_that_return_in_time_are_served_by_the_threads_already_there() -> None:
    seen: list[threading.Thread] = []

    def handler(payload: Payload, ctx: HandlerContext) -> None:
        seen.append(threading.current_thread())

    started: list[int] = []
    for _ in range(5):
        wait_until(lambda: HandlerThreads._busy == 0, 10, "the previous call's thread free again")
        started.append(HandlerThreads._threads)
        assert run_handler(handler, False, {}, CTX, 5, NOT_CANCELLED) == Ending(Outcome.SUCCEEDED)
    assert len(set(started[1:])) == 1  # no thread started once one was there
    assert threading.current_thread() not in seen  # never on the caller's own thread


def test_many_concurrent_calls_each_run_once_and_an_abandoned_one_ends_only_its_thread() -> None:
    release = threading.Event()
    runs: list[int] = []
    lock = threading.Lock()
    abandoned: list[threading.Thread] = []

    def hangs_then_abandons(task: Task) -> None:
        abandoned.append(threading.current_thread())
        task.abandon()  # as the runner does when its call overran the deadline
        release.wait(30)

    HandlerThreads.run(hangs_then_abandons)

    def count(n: int) -> None:
        with lock:
            runs.append(n)

    for n in range(200):
        HandlerThreads.run(lambda _task, n=n: count(n))  # type: ignore[misc]
    wait_until(lambda: len(runs) == 200, 10, "every call run")
    assert sorted(runs) == list(range(200))
    release.set()
    wait_until(lambda: not abandoned[0].is_alive(), 10, "the abandoned call's thread ended once it returned")
    wait_until(lambda: HandlerThreads._busy == 0, 10, "every counted call done")
    assert HandlerThreads._busy <= HandlerThreads._threads


def test_a_failure_is_the_attempts_and_the_thread_serves_the_next_call() -> None:
    def failing(payload: Payload, ctx: HandlerContext) -> None:
        raise ValueError("no")

    ending = run_handler(failing, False, {}, CTX, 5, NOT_CANCELLED)
    assert (ending.outcome, ending.error) == (Outcome.FAILED, "ValueError: no")
    assert ending.traceback is not None
    assert ending.traceback.endswith("ValueError: no\n")
    assert run_handler(lambda payload, ctx: None, False, {}, CTX, 5, NOT_CANCELLED) == Ending(Outcome.SUCCEEDED)


def test_a_hung_handler_times_out_and_its_thread_is_never_handed_another_call() -> None:
    release = threading.Event()
    hung: list[threading.Thread] = []

    def hangs(payload: Payload, ctx: HandlerContext) -> None:
        hung.append(threading.current_thread())
        release.wait(30)

    assert run_handler(hangs, False, {}, CTX, 0.2, NOT_CANCELLED) == Ending(Outcome.TIMEOUT, "timed out after 0.2s")
    later: list[threading.Thread] = []
    assert (
        run_handler(lambda p, c: later.append(threading.current_thread()), False, {}, CTX, 5, NOT_CANCELLED)[0]
        is Outcome.SUCCEEDED
    )
    assert later[0] is not hung[0]
    release.set()
    hung[0].join(10)
    assert not hung[0].is_alive()  # once its call returned, the abandoned thread ended


def test_a_reservation_counts_only_the_threads_that_could_be_started(monkeypatch: pytest.MonkeyPatch) -> None:
    """When no thread can be started, reserve() promises only the idle threads there are, so the executor never
    starts an attempt that no thread would run."""
    HandlerThreads.run(lambda _task: None)  # at least one thread there
    wait_until(lambda: HandlerThreads._busy == 0, 10, "earlier calls done")
    idle = HandlerThreads._threads - HandlerThreads._busy
    assert idle >= 1

    def no_thread(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread (injected)")

    with monkeypatch.context() as patch:
        patch.setattr(threading.Thread, "start", no_thread)
        assert HandlerThreads.reserve(idle + 3) == idle
    assert (HandlerThreads._busy, HandlerThreads._threads - HandlerThreads._busy) == (idle, 0)
    ran = threading.Event()
    HandlerThreads.run_reserved(lambda _task: ran.set())
    assert ran.wait(10)
    HandlerThreads.unreserve(idle - 1)
    wait_until(lambda: HandlerThreads._busy == 0, 10, "the reserved call done and the rest given back")
    assert HandlerThreads.reserve(2) == 2  # threads start again once they can
    HandlerThreads.unreserve(2)
