"""Run one handler call under a deadline, whatever it does: return, raise, hang or exit."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from typing import Any, cast

from shared.handlers.registry import HandlerContext, HandlerFn, Payload
from shared.jsonsafe import storable_text
from shared.model import Outcome


def run_handler(
    handler: HandlerFn, is_async: bool, payload: Payload, ctx: HandlerContext, timeout_s: float
) -> tuple[Outcome, str | None]:
    """The attempt's outcome and error text. Never raises: a handler's failure is the attempt's, not ours.

    Async handlers are cancelled at the deadline. A plain function cannot be interrupted in Python, so it
    runs on its own thread and is abandoned at the deadline: its eventual result is ignored."""
    if is_async:
        return _run_async(handler, payload, ctx, timeout_s)
    box: list[tuple[Outcome, str | None]] = []

    def call() -> None:
        try:
            handler(payload, ctx)
            box.append((Outcome.SUCCEEDED, None))
        except BaseException as exc:
            box.append((Outcome.FAILED, describe(exc)))

    thread = threading.Thread(target=call, daemon=True, name=f"handler-{ctx.job_id}")
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive() or not box:
        return Outcome.TIMEOUT, f"timed out after {timeout_s:g}s"
    return box[0]


def _run_async(
    handler: HandlerFn, payload: Payload, ctx: HandlerContext, timeout_s: float
) -> tuple[Outcome, str | None]:
    async def bounded() -> None:
        await asyncio.wait_for(cast(Awaitable[Any], handler(payload, ctx)), timeout_s)

    try:
        asyncio.run(bounded())
    except TimeoutError:
        return Outcome.TIMEOUT, f"timed out after {timeout_s:g}s"
    except BaseException as exc:
        return Outcome.FAILED, describe(exc)
    return Outcome.SUCCEEDED, None


def describe(exc: BaseException) -> str:
    """The error text of an attempt, storable in any store (a handler's message may hold any characters)."""
    text = str(exc)
    return storable_text(f"{type(exc).__name__}: {text}"[:2000] if text else type(exc).__name__)
