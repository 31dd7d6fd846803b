"""Run one handler call under a deadline, whatever it does: return, raise, hang, exit or get cancelled."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import queue
import threading
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, ClassVar, Final, NamedTuple, cast

from jobsched.handlers import HandlerContext, HandlerFn, not_a_coroutine
from jobsched.outcomes import RETRY_ALL, Cancel, GiveUp, RetryAfter, RetryRule, Snooze
from jobsched.payloads import Payload
from shared.jsonsafe import storable_text
from shared.model import Outcome

log = logging.getLogger("jobsched.executor")
MAX_TRACEBACK_CHARS: Final = 8000


class CancelledFlag(threading.Event):
    """A handler's `ctx.cancelled`: a threading.Event whose condition is made at its first set, clear or wait, not
    with it. Every attempt gets one and next to none is cancelled or waited on, while an Event's Condition costs
    a fifth of an attempt's start (`_begin`) to make. Every method of Event that reads or changes its state is
    defined here on the flag's own; none of Event's state is used."""

    _making: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:  # not Event's: that makes the condition
        self._is_set = False
        self._condition: threading.Condition | None = None

    def __repr__(self) -> str:
        return f"<{type(self).__qualname__} at {id(self):#x}: {'set' if self._is_set else 'unset'}>"

    def _made(self) -> threading.Condition:
        """The condition, made by whichever thread first needs it (one only: a set that notified a condition
        that a waiter did not wait on would be lost)."""
        condition = self._condition
        if condition is None:
            with CancelledFlag._making:
                if self._condition is None:
                    self._condition = threading.Condition(threading.Lock())
                condition = self._condition
        return condition

    def is_set(self) -> bool:
        return self._is_set

    def set(self) -> None:
        with (condition := self._made()):
            self._is_set = True
            condition.notify_all()

    def clear(self) -> None:
        with self._made():
            self._is_set = False

    def wait(self, timeout: float | None = None) -> bool:
        with (condition := self._made()):
            return self._is_set or condition.wait(timeout)


class Cancellation:
    """The cancel signal of one running attempt: sets the handler's `ctx.cancelled` and runs the hooks the
    runner registered (an async handler's task is cancelled). Requesting it twice is the same as once."""

    def __init__(self) -> None:
        self.event = CancelledFlag()
        self._hooks: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    @property
    def requested(self) -> bool:
        return self.event.is_set()

    def request(self) -> None:
        with self._lock:
            if self.event.is_set():
                return
            self.event.set()
            hooks, self._hooks = self._hooks, []
        for hook in hooks:
            hook()

    def on_request(self, hook: Callable[[], None]) -> None:
        """Run `hook` when cancellation is requested (at once if it already was)."""
        with self._lock:
            if not self.event.is_set():
                self._hooks.append(hook)
                return
        hook()


class Ending(NamedTuple):
    """How an attempt's handler call ended: the outcome, the one-line error (lastError) and, for a handler that
    raised, where (its traceback, bounded); what it returned (`returned`, as it is: the runner checks what of it a
    store keeps); for a snooze, for how long; `final`: it gave up (jobsched.GiveUp, or an exception its type's
    retry rule gives up on), no retry."""

    outcome: Outcome
    error: str | None = None
    traceback: str | None = None
    returned: Any = None
    snooze: timedelta | None = None
    final: bool = False
    retry_after: timedelta | None = None
    exception: BaseException | None = None  # what the handler raised, for its attempt's span (shared/tracing)


SUCCEEDED = Ending(Outcome.SUCCEEDED)


def succeeded(returned: Any) -> Ending:
    return SUCCEEDED if returned is None else Ending(Outcome.SUCCEEDED, returned=returned)


def run_async_handler(
    handler: HandlerFn,
    payload: Payload,
    ctx: HandlerContext,
    timeout_s: float,
    cancellation: Cancellation,
    rule: RetryRule = RETRY_ALL,
) -> Ending:
    """How an async handler's attempt ended, run to its end on an event loop of this thread's own. Never raises: a
    handler's failure is the attempt's, not ours. `rule`: the job type's, which decides whether what the handler
    raised is retried.

    The handler is cancelled at the deadline or on a cancellation request. Once cancellation was requested, any
    end but a success is `cancelled`; a handler that ignored the request and succeeded has its success recorded."""
    return settled(_run_async(handler, payload, ctx, timeout_s, cancellation, rule), cancellation)


def settled(ending: Ending, cancellation: Cancellation) -> Ending:
    """Once cancellation was requested, any end but a success is `cancelled`."""
    if cancellation.requested and ending.outcome is not Outcome.SUCCEEDED:
        cause = f" ({ending.error})" if ending.error and ending.outcome is not Outcome.CANCELLED else ""
        return Ending(Outcome.CANCELLED, "cancelled while running" + cause, ending.traceback, ending.returned)
    return ending


def timed_out(timeout_s: float) -> Ending:
    return Ending(Outcome.TIMEOUT, f"timed out after {timeout_s:g}s")


def call_plain(handler: HandlerFn, payload: Payload, ctx: HandlerContext, rule: RetryRule = RETRY_ALL) -> Ending:
    """A plain handler's call on the current thread: how it ended before any deadline or cancellation. A plain
    function cannot be interrupted in Python, so it runs on its attempt's handler thread, sees a cancellation
    request in `ctx.cancelled`, and is abandoned at its deadline (`Deadlines`): its eventual result is ignored."""
    try:
        returned = not_a_coroutine(handler(payload, ctx), ctx.job_type)
    except BaseException as exc:
        return failed(exc, rule)
    return succeeded(returned)


@dataclass(eq=False)
class WatchedCall:
    """A plain handler call that runs on its attempt's own thread, watched by `Deadlines`."""

    deadline: float  # time.monotonic()
    on_expiry: Callable[[], None]
    expired: bool = field(default=False)


class Deadlines:
    """The deadlines of plain handler calls that run on their attempt's own thread rather than being handed to a
    handler thread and waited for (two thread hand-overs per attempt less). One watcher thread sleeps until the
    earliest deadline; a call still running past its deadline is expired: `on_expiry` runs on a thread of its
    own (to write the timeout), and the call's thread, once the call returns, learns it was abandoned.

    The watcher is woken only when a call's deadline is earlier than the one it sleeps towards, so calls of
    one timeout, started one after the other, never wake it."""

    def __init__(self) -> None:
        # Every call takes the lock itself (a Condition's `with` is Python code around it); the watcher waits on
        # the Condition.
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._calls: set[WatchedCall] = set()
        self._wakes_at = math.inf
        self._watcher: threading.Thread | None = None
        self._closed = False

    def watch(self, timeout_s: float, on_expiry: Callable[[], None]) -> WatchedCall:
        call = WatchedCall(time.monotonic() + timeout_s, on_expiry)
        with self._lock:
            if self._watcher is None:
                watcher = threading.Thread(target=self._watch, daemon=True, name="deadlines")
                watcher.start()  # before the call is registered: if it cannot start, nothing is left behind
                self._watcher = watcher
            self._calls.add(call)
            if call.deadline < self._wakes_at:
                self._wakes_at = call.deadline
                self._changed.notify()
        return call

    def returned(self, call: WatchedCall) -> bool:
        """The call has returned: True if in time (its thread goes on with the result), False if it had expired
        (its timeout is being written; its thread is abandoned)."""
        with self._lock:
            if call.expired:
                return False
            self._calls.discard(call)  # the watcher's wake time stays: one early wake-up at most
            return True

    def close(self) -> None:
        """End the watcher once the calls it watches are over (an executor's shutdown waits for them first)."""
        with self._changed:
            self._closed = True
            self._changed.notify()

    def _watch(self) -> None:
        while True:
            with self._changed:
                if self._closed and not self._calls:
                    self._watcher = None
                    return
                now = time.monotonic()
                expired = [call for call in self._calls if call.deadline <= now]
                for call in expired:
                    call.expired = True
                    self._calls.discard(call)
                self._wakes_at = min((call.deadline for call in self._calls), default=math.inf)
                if not expired:
                    self._changed.wait(None if self._wakes_at == math.inf else self._wakes_at - now)
                    continue
            for call in expired:
                _expire(call)


def _expire(call: WatchedCall) -> None:
    """Run a call's expiry on a thread of its own (writing the timeout may wait for the store), or here when no
    thread can be started: the timeout must be written whatever it costs the other deadlines."""
    try:
        threading.Thread(target=_logged(call.on_expiry), daemon=True, name="timeout").start()
    except RuntimeError:
        _logged(call.on_expiry)()


def _logged(step: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        try:
            step()
        except Exception:  # a bug of ours; the reaper closes the attempt once its lease runs out
            log.exception("timeout not recorded", extra={"action": "timeout_error"})

    return run


class HandlerThreads:
    """The threads that run handler calls, all taking them from one shared queue: a thread that has just
    finished a call takes the next waiting one without sleeping, so under load a call rarely waits for a thread
    to wake (a thread per call was a tenth of an executor's CPU with fast handlers, a queue per thread a wake-up
    per call). A thread is started only when every one is busy. A call that overran its deadline is abandoned:
    its thread ends once the call returns, and no longer counts among those that take calls."""

    _calls: ClassVar[queue.SimpleQueue[Task]] = queue.SimpleQueue()
    _lock: ClassVar = threading.Lock()
    _threads: ClassVar = 0  # threads taking calls (the abandoned ones not counted)
    _busy: ClassVar = 0  # calls queued or running, the abandoned ones not counted; never above _threads
    # An executor has up to (1 + RECORD_BACKLOG_PER_SLOT) calls per handler slot in flight; idle threads cost
    # little memory, a new one a thread start.
    MAX_IDLE: ClassVar = 1024

    @classmethod
    def reserve(cls, count: int) -> int:
        """Make sure that `count` more calls will find a thread, starting threads while none is free: how many
        will (fewer when a thread could not be started). Each reservation is used by one `run_reserved` or
        given back by `unreserve`. An executor reserves before it starts attempts, so that a started attempt
        always has a thread to run on."""
        with cls._lock:
            cls._busy += count
            needed = max(0, cls._busy - cls._threads)
            cls._threads += needed
        for started in range(needed):
            try:
                threading.Thread(target=cls._serve, daemon=True, name="handler").start()
            except RuntimeError:
                missing = needed - started
                with cls._lock:
                    cls._threads -= missing
                    cls._busy -= missing
                return count - missing
        return count

    @classmethod
    def run_reserved(cls, call: Callable[[Task], None]) -> Task:
        """Queue the call on a thread reserved for it (`reserve`)."""
        task = Task(call)
        cls._calls.put(task)
        return task

    @classmethod
    def unreserve(cls, count: int = 1) -> None:
        with cls._lock:
            cls._busy -= count

    @classmethod
    def _serve(cls) -> None:
        while True:
            task = cls._calls.get()
            try:
                if not task.abandoned:  # abandoned while it waited: its deadline has passed, it must not run
                    task.call(task)
            except BaseException:  # a bug of ours: this thread must still count as free again
                log.exception("handler thread call failed", extra={"action": "delivery_error"})
            with cls._lock:
                task.done = True
                if task.abandoned:  # already uncounted: another thread takes the calls meanwhile
                    return
                cls._busy -= 1
                if cls._threads - cls._busy > cls.MAX_IDLE:
                    cls._threads -= 1
                    return

    @classmethod
    def _abandon(cls, task: Task) -> None:
        with cls._lock:
            if task.done or task.abandoned:
                return
            task.abandoned = True
            cls._threads -= 1
            cls._busy -= 1


@dataclass(eq=False)
class Task:
    """A call queued to or running on `HandlerThreads`."""

    call: Callable[[Task], None]
    done: bool = False
    abandoned: bool = False

    def abandon(self) -> None:
        """The call overran its deadline: its thread ends once it returns (a no-op if it has returned)."""
        HandlerThreads._abandon(self)


def _run_async(
    handler: HandlerFn,
    payload: Payload,
    ctx: HandlerContext,
    timeout_s: float,
    cancellation: Cancellation,
    rule: RetryRule,
) -> Ending:
    overran: list[bool] = []

    async def bounded() -> Any:
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(cast(Awaitable[Any], handler(payload, ctx)))

        def cancel() -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the handler has ended already
                loop.call_soon_threadsafe(task.cancel)

        cancellation.on_request(cancel)
        started = loop.time()
        try:
            return await asyncio.wait_for(task, timeout_s)
        except TimeoutError:
            # wait_for raises TimeoutError both at the deadline (having cancelled the task) and when the handler
            # raised one of its own (an upstream that did not answer): only the first is the attempt's timeout,
            # the second a failure like any other, which the type's retry rule may give up on.
            if task.cancelled() or loop.time() - started >= timeout_s:
                overran.append(True)
            raise

    try:
        returned = asyncio.run(bounded())
    except TimeoutError as exc:
        return timed_out(timeout_s) if overran else failed(exc, rule)
    except asyncio.CancelledError as exc:
        return Ending(Outcome.CANCELLED) if cancellation.requested else failed(exc, rule)
    except BaseException as exc:
        return failed(exc, rule)
    return succeeded(returned)


def failed(exc: BaseException, rule: RetryRule = RETRY_ALL) -> Ending:
    """How a handler that raised `exc` ended: one of the outcomes a handler asks for (jobsched.outcomes); else a
    failure, which gives up at once when the job type's `rule` says so (give_up_on, retry_on) and is retried
    while attempts are left otherwise. This is the one place an exception becomes an outcome, for plain and
    async handlers, in every executor."""
    if isinstance(exc, Snooze):
        return Ending(Outcome.SNOOZED, storable_text(str(exc)[:2000]), snooze=exc.after)
    if isinstance(exc, Cancel):
        return Ending(Outcome.CANCELLED, storable_text(f"cancelled by the handler: {exc.reason}"[:2000]))
    if isinstance(exc, RetryAfter):
        reason = storable_text(exc.reason[:2000])
        return Ending(Outcome.FAILED, reason, traceback_of(exc), exc.result, retry_after=exc.after, exception=exc)
    if isinstance(exc, GiveUp):
        reason = storable_text(f"gave up: {exc.reason}"[:2000])
        return Ending(Outcome.FAILED, reason, traceback_of(exc), exc.result, final=True, exception=exc)
    why = rule.gives_up(exc)
    if why is not None:
        # The reason first: lastError is one line that a reader (and a bound) may cut short.
        error = storable_text(f"gave up ({why}): {describe(exc)}"[:2000])
        return Ending(Outcome.FAILED, error, traceback_of(exc), final=True, exception=exc)
    return Ending(Outcome.FAILED, describe(exc), traceback_of(exc), exception=exc)


def describe(exc: BaseException) -> str:
    """The error text of an attempt, storable in any store (a handler's message may hold any characters)."""
    text = str(exc)
    return storable_text(f"{type(exc).__name__}: {text}"[:2000] if text else type(exc).__name__)


def traceback_of(exc: BaseException) -> str:
    """Where a handler's exception was raised, as Python prints it, storable in any store: its last
    MAX_TRACEBACK_CHARS (the innermost frames and the error itself are at the end)."""
    text = "".join(traceback.format_exception(exc))
    if len(text) > MAX_TRACEBACK_CHARS:
        text = "…\n" + text[-MAX_TRACEBACK_CHARS:]
    return storable_text(text)
