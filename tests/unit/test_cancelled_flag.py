"""A handler's `ctx.cancelled` (CancelledFlag): a threading.Event in every way a handler can use one, whose condition
is made only when something sets, clears or waits on it."""

from __future__ import annotations

import threading

from services.executor.handler_calls import Cancellation, CancelledFlag


def test_it_is_an_event_that_starts_unset_and_makes_no_condition_until_used() -> None:
    flag = CancelledFlag()
    assert isinstance(flag, threading.Event)
    assert not flag.is_set()
    assert flag._condition is None
    assert flag.wait(0) is False
    assert flag._condition is not None
    assert "unset" in repr(flag)


def test_set_wakes_a_waiter_on_another_thread_and_clear_resets_it() -> None:
    flag = CancelledFlag()
    waiting = threading.Event()
    woke: list[bool] = []

    def wait() -> None:
        waiting.set()
        woke.append(flag.wait(30))

    waiter = threading.Thread(target=wait)
    waiter.start()
    assert waiting.wait(30)
    flag.set()
    waiter.join(30)
    assert woke == [True]
    assert flag.is_set()
    assert flag.wait() is True  # set: returns at once
    assert ": set>" in repr(flag)
    flag.clear()
    assert not flag.is_set()
    assert flag.wait(0.01) is False


def test_threads_that_first_use_it_together_share_one_condition() -> None:
    """Made by one thread only: a set that notified a condition no waiter waits on would be lost."""
    flag = CancelledFlag()
    start = threading.Barrier(8)
    made: list[threading.Condition] = []

    def use() -> None:
        start.wait()
        made.append(flag._made())

    threads = [threading.Thread(target=use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(made) == 8
    assert len({id(condition) for condition in made}) == 1


def test_a_cancellation_sets_its_flag_and_runs_its_hooks_once() -> None:
    cancellation = Cancellation()
    ran: list[str] = []
    cancellation.on_request(lambda: ran.append("hook"))
    cancellation.request()
    cancellation.request()
    assert cancellation.event.is_set()
    assert cancellation.requested
    assert ran == ["hook"]
