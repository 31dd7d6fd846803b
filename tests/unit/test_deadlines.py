"""Deadlines: the one watcher thread of an executor's plain handler calls."""

from __future__ import annotations

import threading

import pytest

from services.executor.handler_calls import Deadlines


def test_a_call_past_its_deadline_expires_once_and_one_in_time_does_not() -> None:
    deadlines = Deadlines()
    expired = threading.Event()
    late = deadlines.watch(0.05, expired.set)
    in_time = deadlines.watch(60, lambda: pytest.fail("expired a call that returned in time"))
    assert deadlines.returned(in_time) is True
    assert expired.wait(5)
    assert deadlines.returned(late) is False  # its thread learns it was abandoned
    deadlines.close()


def test_an_expiry_runs_on_the_watcher_when_no_thread_can_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where hung handlers have used up the threads, the timeout must still be written (else the job would stay
    running, its lease extended by the heartbeat, out of the reaper's reach)."""
    start = threading.Thread.start

    def refuse_timeout_threads(thread: threading.Thread) -> None:
        if thread.name == "timeout":
            raise RuntimeError("can't start new thread")
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", refuse_timeout_threads)
    deadlines = Deadlines()
    first, second = threading.Event(), threading.Event()
    deadlines.watch(0.05, first.set)
    assert first.wait(5)
    deadlines.watch(0.05, second.set)  # the watcher lived on
    assert second.wait(5)
    deadlines.close()


def test_close_ends_the_watcher_once_no_call_is_watched() -> None:
    deadlines = Deadlines()
    call = deadlines.watch(60, lambda: None)
    watcher = deadlines._watcher
    assert watcher is not None
    assert watcher.is_alive()
    assert deadlines.returned(call)
    deadlines.close()
    watcher.join(5)
    assert not watcher.is_alive()
