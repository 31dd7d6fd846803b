"""Group commit: many threads' small writes of one kind become one bulk write.

An executor runs each delivery on its own thread, and each thread makes the same few store calls. One bulk call
for the requests of many threads costs little more than one single call (one round trip, one command for the
server to parse, plan and log), so under load the store's cost follows the batches, not the calls. A caller
that finds no batch in flight runs one for every request queued so far; callers that arrive meanwhile queue up
and the next of them runs the following batch. Nothing waits for a timer: with one caller the batch is that one
request, under load batches grow by themselves (the classic group commit of databases' write-ahead logs).

A caller that need not wait for its result (`submit_later`) leaves a callback instead: it is run with the result
by whichever thread writes the batch, and the caller goes on at once unless it is the one to write.

The first caller after a lull leads a batch of one while its siblings are still on their way (the handlers of a
started batch of attempts all end within a millisecond): a group that `gathers` lets them queue before it takes a
batch, by giving the interpreter to the threads ready to run for as long as the queue grows meanwhile (a few turns
at most). A lone caller pays one yield; the executor's outcomes were written in 1.75 transactions per batch of
attempts started, 1.2 with it (`embedded`, 20,000 jobs).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

Request = TypeVar("Request")
Result = TypeVar("Result")
BatchFn = Callable[[Sequence[Request]], Sequence[Result | BaseException]]
GATHER_TURNS = 4  # the most yields a gathering batch waits, each only while the queue grew during the last one
log = logging.getLogger("jobsched.store")


def _taken_lock() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock


@dataclass(eq=False)
class _Waiter(Generic[Request, Result]):
    request: Request
    # Released exactly once if the waiter has to wait at all: to lead the next batch, or with its result. A held
    # lock is the cheapest one-shot signal there is (an Event is a condition, a lock and a list).
    wake: threading.Lock = field(default_factory=_taken_lock)
    leads: bool = False  # woken to run the next batch rather than with its own result
    result: Result | BaseException | None = None
    done: bool = False
    # Set for submit_later: nobody waits on `wake`; the batch's writer runs this with the result.
    on_result: Callable[[Result | BaseException], None] | None = None


class GroupCommit(Generic[Request, Result]):
    def __init__(self, run_batch: BatchFn[Request, Result], max_batch: int = 256, *, gathers: bool = False) -> None:
        """`run_batch(requests)` returns one result or exception per request, in order. If it raises, every
        request of that batch gets the exception. One batch runs at a time: the next one collects what arrives
        meanwhile, which keeps batches large under load. `gathers`: a batch lets the requests on their way queue
        first (for callers that do not wait for their result: a caller waiting would wait the longer)."""
        self._run_batch = run_batch
        self._max_batch = max_batch
        self._gathers = gathers
        self._lock = threading.Lock()
        self._queue: list[_Waiter[Request, Result]] = []
        self._busy = False  # a caller is running a batch, or has been told to run the next one

    def submit(self, request: Request) -> Result:
        waiter: _Waiter[Request, Result] = _Waiter(request)
        with self._lock:
            self._queue.append(waiter)
            waiter.leads = not self._busy
            self._busy = True
        # A leader is always the head of the queue, so its own request is in the batch it runs: a waiter is woken
        # at most once (to lead, or done), and a leader is done after its batch.
        if not waiter.leads:
            waiter.wake.acquire()
        if waiter.leads:
            waiter.leads = False
            self._run_batches()
        if isinstance(waiter.result, BaseException):
            raise waiter.result
        return waiter.result  # type: ignore[return-value]  # done without exception: a Result

    def submit_later(self, request: Request, on_result: Callable[[Result | BaseException], None]) -> None:
        """Queue `request` without waiting for its result: `on_result(result or exception)` runs on the thread
        that writes its batch. With no batch in flight that is this caller, which then also writes what queues
        up meanwhile, until a waiting `submit` caller can take over or nothing is left."""
        waiter: _Waiter[Request, Result] = _Waiter(request, on_result=on_result)
        with self._lock:
            self._queue.append(waiter)
            leads = not self._busy
            self._busy = True
        if leads:
            self._run_batches()

    def _run_batches(self) -> None:
        while self._run_one_batch():
            pass

    def _run_one_batch(self) -> bool:
        """Write the next batch; True when this thread is to write the one after it too (its head left a
        callback rather than waiting)."""
        if self._gathers:
            self._gather()
        with self._lock:
            batch = self._queue[: self._max_batch]
            del self._queue[: self._max_batch]
        results: Sequence[Result | BaseException]
        try:
            results = self._run_batch([w.request for w in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"batch function returned {len(results)} results for {len(batch)} requests")
        except BaseException as exc:  # every caller of the batch learns why, none hangs
            results = [exc] * len(batch)
        for waiter, result in zip(batch, results, strict=True):
            if waiter.on_result is not None:
                _call(waiter.on_result, result)
                continue
            waiter.result = result
            waiter.done = True
            waiter.wake.release()
        # Hand the next batch to the head of the queue if it waits anyway, so no waiting caller serves others
        # forever; callbacks have nobody waiting, so their batches are written by this thread.
        with self._lock:
            if not self._queue:
                self._busy = False
                return False
            head = self._queue[0]
            if head.on_result is not None:
                return True
            head.leads = True
            head.wake.release()
            return False

    def _gather(self) -> None:
        """Yield the interpreter while the queue grows, at most GATHER_TURNS times: the threads ready to run take
        their turn and those about to queue a request do (under the GIL a yield lets them run until they block).
        The batch's transaction then waits less too: each of its statements gives the GIL away, and a thread
        that took it meanwhile keeps it up to the switch interval while it runs Python."""
        for _ in range(GATHER_TURNS):
            queued = len(self._queue)
            time.sleep(0)
            if len(self._queue) == queued:
                return


def _call(on_result: Callable[[Result | BaseException], None], result: Result | BaseException) -> None:
    try:
        on_result(result)
    except BaseException:  # one caller's bug must not cost the others their results, nor stall the writer
        log.exception("a group commit callback failed", extra={"action": "group_commit_callback_error"})
