"""Fair shares of what the API holds for requests: who shares, and how many each may hold at once.

With AUTH=required, a request's sharer is its API key (a key that verifies; the bearer of a missing, unknown
or revoked key is "the public", one sharer for all such requests). Without authentication every request is
the public's and only the totals apply: there are no tenants to be fair between.

A sharer may hold at most its share of a limit, whatever the others do: one key's flood or slow sockets use up
its own share and leave the rest to the others. The totals still bound the process as a whole.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from contextvars import ContextVar
from typing import Final

PUBLIC: Final = "public"

# The request's sharer, set by the request limits (request_limits.py) for everything the request then does.
current_sharer: ContextVar[str] = ContextVar("current_sharer", default=PUBLIC)


class FairShares:
    """`total` places, of which one sharer holds at most `per_sharer`."""

    def __init__(self, total: int, per_sharer: int) -> None:
        self.total = total
        self.per_sharer = min(per_sharer, total)
        self._held: Counter[str] = Counter()
        self._in_use = 0
        self._freed = asyncio.Event()

    def held(self, sharer: str) -> int:
        return self._held[sharer]

    @property
    def in_use(self) -> int:
        return self._in_use

    def try_take(self, sharer: str) -> bool:
        """A place for `sharer` now, or False when the total or its share is reached."""
        if self._in_use >= self.total or self._held[sharer] >= self.per_sharer:
            return False
        self._in_use += 1
        self._held[sharer] += 1
        return True

    async def take(self, sharer: str, timeout_s: float) -> bool:
        """A place for `sharer` within `timeout_s`, or False."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not self.try_take(sharer):
            # Every release wakes every waiter; each checks its own share again (there are few of them: the
            # requests in flight bound the waiters).
            if self._freed.is_set():
                self._freed = asyncio.Event()
            try:
                async with asyncio.timeout_at(deadline):
                    await self._freed.wait()
            except TimeoutError:
                return self.try_take(sharer)
        return True

    def give_back(self, sharer: str) -> None:
        self._in_use -= 1
        self._held[sharer] -= 1
        if not self._held[sharer]:
            del self._held[sharer]
        self._freed.set()
