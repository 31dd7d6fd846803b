"""Run one handler call under a deadline, whatever it does: return, raise, hang, exit or get cancelled."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, cast

from shared.handlers.registry import HandlerContext, HandlerFn, Payload
from shared.jsonsafe import storable_text
from shared.model import Outcome


class Cancellation:
    """The cancel signal of one running attempt: sets the handler's `ctx.cancelled` and runs the hooks the
    runner registered (an async handler's task is cancelled). Requesting it twice is the same as once."""

    def __init__(self) -> None:
        self.event = threading.Event()
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


def run_handler(
    handler: HandlerFn,
    is_async: bool,
    payload: Payload,
    ctx: HandlerContext,
    timeout_s: float,
    cancellation: Cancellation,
) -> tuple[Outcome, str | None]:
    """The attempt's outcome and error text. Never raises: a handler's failure is the attempt's, not ours.

    Async handlers are cancelled at the deadline or on a cancellation request. A plain function cannot be
    interrupted in Python, so it runs on a handler thread of its own, sees the request in `ctx.cancelled`, and
    is abandoned at the deadline: its eventual result is ignored. Once cancellation was requested, any end but
    a success is `cancelled`; a handler that ignored the request and succeeded has its success recorded."""
    if is_async:
        outcome, error = _run_async(handler, payload, ctx, timeout_s, cancellation)
    else:
        outcome, error = _run_sync(handler, payload, ctx, timeout_s)
    if cancellation.requested and outcome is not Outcome.SUCCEEDED:
        return Outcome.CANCELLED, "cancelled while running" + (
            f" ({error})" if error and outcome is not Outcome.CANCELLED else ""
        )
    return outcome, error


def _run_sync(
    handler: HandlerFn, payload: Payload, ctx: HandlerContext, timeout_s: float
) -> tuple[Outcome, str | None]:
    box: list[tuple[Outcome, str | None]] = []
    # Released when the call has returned: a held lock is the cheapest one-shot signal (an Event is a
    # condition, a lock and a list of waiters, each built anew per call).
    done = threading.Lock()
    done.acquire()

    def call() -> None:
        try:
            handler(payload, ctx)
            box.append((Outcome.SUCCEEDED, None))
        except BaseException as exc:
            box.append((Outcome.FAILED, describe(exc)))
        finally:
            done.release()

    thread = _HandlerThread.take()
    thread.run_call(call)
    if not done.acquire(timeout=timeout_s) or not box:
        thread.abandon()
        return Outcome.TIMEOUT, f"timed out after {timeout_s:g}s"
    thread.give_back()
    return box[0]


class _HandlerThread:
    """A thread that runs one handler call at a time and is reused for the next while its calls return in
    time (starting a thread per call was a tenth of an executor's CPU with fast handlers). One that overran its
    deadline is abandoned: it ends once its call returns, and is never handed a call again."""

    _idle: ClassVar[list[_HandlerThread]] = []
    _idle_lock: ClassVar = threading.Lock()
    MAX_IDLE: ClassVar = 256

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        threading.Thread(target=self._serve, daemon=True, name="handler").start()

    @classmethod
    def take(cls) -> _HandlerThread:
        with cls._idle_lock:
            if cls._idle:
                return cls._idle.pop()
        return cls()

    def run_call(self, call: Callable[[], None]) -> None:
        self._calls.put(call)

    def give_back(self) -> None:
        with self._idle_lock:
            if len(self._idle) < self.MAX_IDLE:
                self._idle.append(self)
                return
        self._calls.put(None)

    def abandon(self) -> None:
        self._calls.put(None)  # read once the overrunning call has returned: then the thread ends

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            call()


def _run_async(
    handler: HandlerFn, payload: Payload, ctx: HandlerContext, timeout_s: float, cancellation: Cancellation
) -> tuple[Outcome, str | None]:
    async def bounded() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(cast(Awaitable[Any], handler(payload, ctx)))

        def cancel() -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the handler has ended already
                loop.call_soon_threadsafe(task.cancel)

        cancellation.on_request(cancel)
        await asyncio.wait_for(task, timeout_s)

    try:
        asyncio.run(bounded())
    except TimeoutError:
        return Outcome.TIMEOUT, f"timed out after {timeout_s:g}s"
    except asyncio.CancelledError:
        return (Outcome.CANCELLED, None) if cancellation.requested else (Outcome.FAILED, "CancelledError")
    except BaseException as exc:
        return Outcome.FAILED, describe(exc)
    return Outcome.SUCCEEDED, None


def describe(exc: BaseException) -> str:
    """The error text of an attempt, storable in any store (a handler's message may hold any characters)."""
    text = str(exc)
    return storable_text(f"{type(exc).__name__}: {text}"[:2000] if text else type(exc).__name__)
