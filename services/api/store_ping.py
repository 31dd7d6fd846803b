"""The readiness probe's look at the store, which anyone may ask for (/readyz is public).

One ping runs at a time, on a thread of its own (never behind job traffic's store calls), and its answer is
shared by every probe that asked meanwhile and kept for FRESH_S: however many callers there are, the store
sees at most one ping in flight and about one a second, and the orchestrator's probe is answered at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final

import anyio
import anyio.to_thread

FRESH_S: Final = 1.0


class StorePing:
    def __init__(self, ping: Callable[[], None]) -> None:
        self._ping = ping
        self._thread = anyio.CapacityLimiter(1)
        self._running: asyncio.Future[None] | None = None
        self._answered_at = float("-inf")
        self._failure: BaseException | None = None

    async def check(self) -> None:
        """Return when the store answered a ping lately; raise what the last ping raised."""
        if time.monotonic() - self._answered_at > FRESH_S:
            if self._running is None:
                self._running = asyncio.ensure_future(self._ping_once())
            await asyncio.shield(self._running)
        if self._failure is not None:
            raise self._failure

    async def _ping_once(self) -> None:
        try:
            await anyio.to_thread.run_sync(self._ping, limiter=self._thread)
            self._failure = None
        except Exception as exc:  # the store's own error, answered to every probe that shared this ping
            self._failure = exc
        finally:
            self._answered_at = time.monotonic()
            self._running = None
