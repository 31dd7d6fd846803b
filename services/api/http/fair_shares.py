"""Fair shares of what the API holds for requests: who shares, and how many each may hold at once.

With AUTH=required, a request's sharer is its API key (a key that verifies; the bearer of a missing, unknown
or revoked key is "the public", one sharer for all such requests). Without authentication every request is
the public's and only the totals apply: there are no tenants to be fair between.

A sharer may hold at most its share of a limit, whatever the others do: one key's flood or slow sockets use up
its own share and leave the rest to the others. The totals still bound the process as a whole.

A waiter may go first (take(first=True)): work the API has already promised (the later pages of a response
whose status line was sent) is served before new requests, which can still be told 503, so that an overload
sheds new work instead of breaking what is under way. Going first never passes the sharer's own share.
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
        # Waiters that go first (take(first=True)), by sharer: the places they may take are kept from the others.
        self._first: Counter[str] = Counter()

    def held(self, sharer: str) -> int:
        return self._held[sharer]

    @property
    def in_use(self) -> int:
        return self._in_use

    def try_take(self, sharer: str, *, first: bool = False) -> bool:
        """A place for `sharer` now, or False when the total or its share is reached, or (unless `first`) when the
        free places are kept for waiters that go first."""
        if self._in_use >= self.total or self._held[sharer] >= self.per_sharer:
            return False
        if not first and self._in_use + self._kept_for_first() >= self.total:
            return False
        self._in_use += 1
        self._held[sharer] += 1
        return True

    async def take(self, sharer: str, timeout_s: float | None, *, first: bool = False) -> bool:
        """A place for `sharer` within `timeout_s` (None: however long it takes), or False. A `first` waiter goes
        ahead of every taker that is not: no new taker gets a place it could take."""
        if self.try_take(sharer, first=first):
            return True
        if first:
            self._first[sharer] += 1
        try:
            return await self._wait(sharer, timeout_s, first)
        finally:
            if first:
                self._first[sharer] -= 1
                if not self._first[sharer]:
                    del self._first[sharer]
                self._freed.set()  # a place it kept (cancelled, or past its deadline) is the others' again

    async def _wait(self, sharer: str, timeout_s: float | None, first: bool) -> bool:
        deadline = None if timeout_s is None else asyncio.get_running_loop().time() + timeout_s
        while not self.try_take(sharer, first=first):
            # Every release wakes every waiter; each checks its own share again (there are few of them: the
            # requests in flight bound the waiters).
            if self._freed.is_set():
                self._freed = asyncio.Event()
            try:
                async with asyncio.timeout_at(deadline):
                    await self._freed.wait()
            except TimeoutError:
                return self.try_take(sharer, first=first)
        return True

    def give_back(self, sharer: str) -> None:
        self._in_use -= 1
        self._held[sharer] -= 1
        if not self._held[sharer]:
            del self._held[sharer]
        self._freed.set()

    def _kept_for_first(self) -> int:
        """The places the waiters that go first could take now, each within its sharer's share (a waiter whose
        sharer holds its whole share waits for one of its own, and keeps nothing from the others)."""
        return sum(min(waiting, self.per_sharer - self._held[sharer]) for sharer, waiting in self._first.items())
