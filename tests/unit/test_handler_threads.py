"""The handler threads, as an executor uses them: a call on a thread reserved for it (Executor._start), a plain
handler called there (call_plain). Threads are reused, an abandoned call ends only its own thread, and a
reservation promises only the threads there are. A hung handler abandoned at its deadline, through the executor:
tests/integration/test_executor_deadlines.py."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from jobsched import HandlerContext, Payload
from jobsched.handlers import HandlerFn, JobLogger
from services.executor.handler_calls import Cancellation, Ending, HandlerThreads, Task, call_plain
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


def on_a_handler_thread(call: Callable[[Task], None]) -> Task:
    """The call on a handler thread reserved for it, as an executor hands a started attempt over."""
    assert HandlerThreads.reserve(1) == 1
    return HandlerThreads.run_reserved(call)


def ending_of(handler: HandlerFn) -> Ending:
    """How a plain handler's call ended on a handler thread."""
    ended: queue.SimpleQueue[Ending] = queue.SimpleQueue()
    on_a_handler_thread(lambda _task: ended.put(call_plain(handler, {}, CTX)))
    return ended.get(timeout=10)


def test_calls_that_return_in_time_are_served_by_the_threads_already_there() -> None:
    seen: list[threading.Thread] = []

    def handler(payload: Payload, ctx: HandlerContext) -> None:
        seen.append(threading.current_thread())

    started: list[int] = []
    for _ in range(5):
        wait_until(lambda: HandlerThreads._busy == 0, 10, "the previous call's thread free again")
        started.append(HandlerThreads._threads)
        assert ending_of(handler) == Ending(Outcome.SUCCEEDED)
    assert len(set(started[1:])) == 1  # no thread started once one was there
    assert threading.current_thread() not in seen  # never on the caller's own thread


def test_many_concurrent_calls_each_run_once_and_an_abandoned_one_ends_only_its_thread() -> None:
    release = threading.Event()
    runs: list[int] = []
    lock = threading.Lock()
    abandoned: list[threading.Thread] = []

    def hangs_then_abandons(task: Task) -> None:
        abandoned.append(threading.current_thread())
        task.abandon()  # as the executor does when its call overran the deadline
        release.wait(30)

    on_a_handler_thread(hangs_then_abandons)

    def count(n: int) -> None:
        with lock:
            runs.append(n)

    for n in range(200):
        on_a_handler_thread(lambda _task, n=n: count(n))  # type: ignore[misc]
    wait_until(lambda: len(runs) == 200, 10, "every call run")
    assert sorted(runs) == list(range(200))
    release.set()
    wait_until(lambda: not abandoned[0].is_alive(), 10, "the abandoned call's thread ended once it returned")
    wait_until(lambda: HandlerThreads._busy == 0, 10, "every counted call done")
    assert HandlerThreads._busy <= HandlerThreads._threads


def test_a_failure_is_the_attempts_and_the_thread_serves_the_next_call() -> None:
    def failing(payload: Payload, ctx: HandlerContext) -> None:
        raise ValueError("no")

    ending = ending_of(failing)
    assert (ending.outcome, ending.error) == (Outcome.FAILED, "ValueError: no")
    assert ending.traceback is not None
    assert ending.traceback.endswith("ValueError: no\n")
    assert ending_of(lambda payload, ctx: None) == Ending(Outcome.SUCCEEDED)


def test_a_reservation_counts_only_the_threads_that_could_be_started(monkeypatch: pytest.MonkeyPatch) -> None:
    """When no thread can be started, reserve() promises only the idle threads there are, so the executor never
    starts an attempt that no thread would run."""
    on_a_handler_thread(lambda _task: None)  # at least one thread there
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
