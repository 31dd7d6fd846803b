"""Due slots: how a claim reads only the runs that can be due, on a server that does not push filters down.

FerretDB 1.x (the MongoDB stand-in) pushes only equality filters down to its backend and evaluates everything
else, `scheduledAt <= now` included, by decoding every document the equality part matched: a claim that
filters `status = pending` decodes every pending job, future ones too, and its cost grows with the backlog.
So every pending run also carries `dueSlot`, an equality key chosen when it is written:
the number of the SLOT_S-long time slot in which it becomes due as seen at that moment, i.e. the slot of
max(scheduledAt, now). A run written for the past lands in the current slot, one for later in its own.

A claim queries, each by equality, the slots where the previous claim left due runs (over its limit) and the
current one (in steady state: the current slot only). When a new slot begins it also re-reads the previous
slot (runs that fell due after its last claim) and LOOKBACK_SLOTS before it (writes that landed late). Passed
slots with runs left in them are answered from the claimer's backlog cache (claim_lanes.py) without a query.
A full sweep (the plain range query) runs at the first claim, every FULL_SWEEP_S (longer when sweeps are slow:
at most SWEEP_SHARE of the claimer's time goes to them), and whenever more than
MAX_SLOT_QUERIES slots would need a query and those queries are not measured to cost less than the last sweep
did: it finds anything the window could miss (a write delayed by more than LOOKBACK_SLOTS * SLOT_S, clocks
further apart than that, a document without a slot). The measured exception matters where a sweep is slow:
behind a large future backlog a sweep takes seconds, so the next claim's window already spans more than
MAX_SLOT_QUERIES slots; without it, that claim would sweep again, and every claim after it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable
from datetime import datetime
from typing import Final

SLOT_S: Final = 1
LOOKBACK_SLOTS: Final = 2
MAX_SLOT_QUERIES: Final = 12
FULL_SWEEP_S: Final = 60.0
# A sweep reads every pending run, future ones included: behind a large backlog, one a minute would keep a core
# busy. Sweeps are spaced so that they take at most this share of the claimer's time.
SWEEP_SHARE: Final = 0.05


def slot_of(moment: datetime) -> int:
    return int(moment.timestamp() // SLOT_S)


def due_slot(scheduled_at: datetime | None, now: datetime) -> int:
    """The slot of a pending run written at `now`: where it becomes due, as seen now."""
    return slot_of(max(scheduled_at, now) if scheduled_at is not None else now)


class SlotWindow:
    """One claimer's memory of which slots may still hold due, unclaimed runs (not shared between
    processes: a new leader starts with a full sweep)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._behind: set[int] | None = None  # slots where the last claim left due runs; None: unknown, sweep
        self._current: int | None = None  # the slot the last claim ran in
        self._next_full_sweep = 0.0
        self._sweep_s: float | None = None  # how long the last full sweep's read took
        self._slot_query_s: float | None = None  # how long one slot query takes (moving average)

    def plan(self, now: datetime, due_by: datetime, cached: Collection[int] = ()) -> list[int] | None:
        """The slots to query for runs due by `due_by`, oldest first, or None for a full sweep. Slots in
        `cached` are answered without a query (claim_lanes.BacklogCache) and do not count towards the limit."""
        current, last = slot_of(now), slot_of(due_by)
        if self._behind is None or self._current is None or self._clock() >= self._next_full_sweep:
            return None
        first = current
        if current != self._current:  # a new slot began: re-read the last one, and look back for late writes
            first = min(self._current, current) - LOOKBACK_SLOTS
        # A slot between these that the last claim left nothing in holds no due run: its runs were due then
        # (they are older than the slot it ran in), and no writer puts new runs into a passed slot.
        slots = self._behind.union(range(first, max(last, current) + 1))
        queries = sum(1 for slot in slots if slot not in cached)
        if queries > MAX_SLOT_QUERIES and not self._cheaper_than_a_sweep(queries):
            return None
        return sorted(slots)

    def _cheaper_than_a_sweep(self, queries: int) -> bool:
        if self._sweep_s is None or self._slot_query_s is None:
            return False
        return queries * self._slot_query_s < self._sweep_s

    def claimed(
        self,
        now: datetime,
        full_sweep: bool,
        left_behind: Iterable[int | None],
        read_s: float = 0.0,
        queries: int = 0,
    ) -> None:
        """After a claim: `left_behind` holds the slots of due runs it found but did not take (over its limit);
        `read_s` is how long reading the candidates took, with `queries` slot queries (or the full sweep)."""
        self._current = slot_of(now)
        if full_sweep:
            self._next_full_sweep = self._clock() + max(FULL_SWEEP_S, read_s / SWEEP_SHARE)
            self._sweep_s = read_s
        elif queries:
            per_query = read_s / queries
            previous = self._slot_query_s
            self._slot_query_s = per_query if previous is None else 0.8 * previous + 0.2 * per_query
        slots = set(left_behind)
        # runs without a slot can only be found by sweeping
        self._behind = None if None in slots else {s for s in slots if s is not None}
