"""StoreSlots of the API's store calls: how many run at once, and how long a request may wait for its turn.

Store calls block a thread each (pymongo, sqlite3). Without a bound, a burst of writes on a store that takes
writes one at a time (SQLite) fills every worker thread with writers waiting for the write lock: reads queue
behind them and every request waits seconds. Here writes and reads each have their own slots, so reads are
never stuck behind writes, and a request that cannot start within `wait_s` (no slot, or no turn inside the
store: SQLite's write lock) is answered 503 with Retry-After: the client learns about the overload within that
budget instead of after the store's own timeout. The slots are shared fairly (fair_shares.py): one API key's
requests hold at most `slots_per_sharer` of each kind, so its slow queries cannot keep another key's out.

A read for a response whose status line was already sent (the later pages of a streamed listing:
routes/pages.py) cannot be answered 503 any more: refusing it would cut the body short, and the client would
get a broken answer where it should have had a whole one or a 503. Such a read (read_continuing) waits for its
slot without the deadline, ahead of new requests' reads (fair_shares.py: it goes first). It still takes a
slot, within its key's share, only for the store call itself, never while the client reads what it returned,
so a slow reader holds no slot; the wait is bounded by the calls ahead of it, and the request's place in flight
is bounded as every request's is (request_limits.py).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread

from services.api.http.errors import ApiError
from services.api.http.fair_shares import FairShares, current_sharer
from shared.store.base import WAIT_DEADLINE

T = TypeVar("T")
WRITE_SLOTS = 32
READ_SLOTS = 32
WAIT_S = 1.0


class Overloaded(ApiError):
    def __init__(self, kind: str, wait_s: float, own_share: int | None) -> None:
        if own_share is not None:
            why = f"this API key's requests hold all {own_share} of its {kind} slots"
        else:
            why = f"no {kind} slot within {wait_s:g}s"
        super().__init__(503, f"the API is overloaded ({why}); retry later")


class StoreSlots:
    def __init__(
        self,
        *,
        write_slots: int = WRITE_SLOTS,
        read_slots: int = READ_SLOTS,
        wait_s: float = WAIT_S,
        slots_per_sharer: int | None = None,
    ) -> None:
        self._slots = {
            "write": FairShares(write_slots, slots_per_sharer or write_slots),
            "read": FairShares(read_slots, slots_per_sharer or read_slots),
        }
        self._shared = slots_per_sharer is not None
        # A thread for every admitted call: once admitted, a call never waits again for a thread.
        self._threads = anyio.CapacityLimiter(write_slots + read_slots)
        self._wait_s = wait_s

    async def write(self, fn: Callable[..., T], *args: object) -> T:
        return await self._call("write", fn, *args)

    async def read(self, fn: Callable[..., T], *args: object) -> T:
        return await self._call("read", fn, *args)

    async def read_continuing(self, fn: Callable[..., T], *args: object) -> T:
        """A read for a response already started: waits for its slot however long the calls ahead of it take,
        before any new request's read, and is never Overloaded."""
        return await self._call("read", fn, *args, started=True)

    async def _call(self, kind: str, fn: Callable[..., T], *args: object, started: bool = False) -> T:
        slots = self._slots[kind]
        sharer = current_sharer.get()
        deadline = None if started else time.monotonic() + self._wait_s
        if not await slots.take(sharer, None if started else self._wait_s, first=started):
            own_share = slots.per_sharer if self._shared and slots.held(sharer) >= slots.per_sharer else None
            raise Overloaded(kind, self._wait_s, own_share)
        # The rest of the same budget is what the call may wait inside the store (its thread copies this context);
        # a call for a started response has none: the store's own timeout bounds it.
        token = WAIT_DEADLINE.set(deadline)
        try:
            # Not cancellable once started: a write that ran must be answered as done, never as a timeout.
            return await anyio.to_thread.run_sync(functools.partial(fn, *args), limiter=self._threads)
        finally:
            WAIT_DEADLINE.reset(token)
            slots.give_back(sharer)
