"""Which due runs a claim takes, and in what order: tenants take turns.

Due runs are grouped in lanes, one per tenant and job type. A claim visits the lanes in rounds and takes the next
run of each lane in turn, so a tenant with a backlog of a hundred thousand runs and a tenant with one due run
share a claim: the one run goes within the first round, not after the backlog. Within a lane runs keep the claim
order (priority desc, then scheduledAt asc): priority orders a tenant's own runs, never one tenant before another.
Lanes take their turns in the order of their first due run (its priority, then how long it has been due), so in
a claim too small for one round the runs that have waited longest go first.

A type may have less room than the claim (claim_limits.py: wake-ups its executors have not taken yet, its
concurrency limits, its start rate): its lanes stop taking runs when its room is spent and the other types' lanes
go on; a run whose tenant or concurrency key is at its limit is passed over (the lane goes on with its other keys,
or ends for this claim when the tenant is full), as is a run whose key's start rate has no start within reach.

Stores supply the lanes (which tenants have due runs of each type, found from an index, never by reading every
due run) and read each lane's runs in chunks, only as far as the claim gets; this module only chooses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from shared.model import Job
from shared.store.claim_limits import Verdict


class Due(Protocol):
    """A due run as a store reads it for choosing (a Job, or a few columns of it)."""

    @property
    def id(self) -> str: ...


R = TypeVar("R", bound=Due)
# A lane's runs due by the claim's time, in claim order, after the given run (None: from the first), at most n.
LaneReader = Callable[[R | None, int], list[R]]


@dataclass
class Lane(Generic[R]):
    """The due runs of one tenant and job type, read on demand."""

    job_type: str
    tenant_id: str
    head: tuple[int, Any]  # claim-order key of its first due run: (-priority, scheduledAt), see head_of
    read: LaneReader[R]
    buffered: list[R] = field(default_factory=list)  # read ahead, next run last (a store may pass the first)
    _last: R | None = None
    _exhausted: bool = False

    def next_run(self, chunk: int) -> R | None:
        if not self.buffered and not self._exhausted:
            self.buffered = self.read(self._last, chunk)
            self._exhausted = len(self.buffered) < chunk
            self.buffered.reverse()  # pop() from the end: the next run in claim order
        if not self.buffered:
            return None
        self._last = self.buffered.pop()
        return self._last


class Claim(list[Job]):
    """The jobs a claim won, in the order they were chosen; the types whose room held due runs back (the
    scheduler claims again soon rather than at its next period: their room comes back as their runs start and
    end, not when new runs are written); the start time given to runs of a rate-limited type that may not start
    at once (their wake-ups are held until then); the runs of each limited type in flight before the claim; and
    the types of which the claim passed runs over for their concurrency key's start rate (`waited`: not held, as
    their turn comes with time)."""

    def __init__(
        self,
        jobs: Iterable[Job] = (),
        held: Iterable[str] = (),
        *,
        not_before: Mapping[str, datetime] | None = None,
        in_use: Mapping[str, int] | None = None,
        waited: Iterable[str] = (),
    ) -> None:
        super().__init__(jobs)
        self.held = frozenset(held)
        self.waited = frozenset(waited)
        self.not_before = dict(not_before or {})
        self.in_use = dict(in_use or {})


@dataclass
class Selection(Generic[R]):
    runs: list[R]
    held: set[str]  # types that had due runs beyond their room


def fair_selection(
    lanes: Iterable[Lane[R]],
    limit: int,
    rooms: Mapping[str, int | None],
    admit: Callable[[Lane[R], R], Verdict] | None = None,
) -> Selection[R]:
    """Up to `limit` runs, lanes taking turns (see the module docstring), at most rooms[type] of a type (no bound
    where the room is None or missing), each run `admit`ted (claim_limits.Admission). The runs come in the order
    they were chosen."""
    budget = dict(rooms)
    held: set[str] = set()
    turns: list[Lane[R]] = []
    for lane in lanes:
        if budget.get(lane.job_type) == 0:
            held.add(lane.job_type)
        else:
            turns.append(lane)
    turns.sort(key=lambda lane: lane.head)
    # A first read per lane of its share of the claim; a lane that has more reads on in larger chunks.
    chunk = max(1, -(-limit // max(1, len(turns))))
    chosen: list[R] = []
    while turns and len(chosen) < limit:
        still: list[Lane[R]] = []
        for lane in turns:
            if len(chosen) == limit:
                break
            room = budget.get(lane.job_type)
            run = lane.next_run(chunk)
            verdict = Verdict.TAKE
            while run is not None and room != 0 and admit is not None and (verdict := admit(lane, run)).passed_over:
                if verdict is Verdict.SKIP:
                    held.add(lane.job_type)
                run = lane.next_run(chunk)
            if run is None:
                continue
            if room == 0 or verdict is Verdict.CLOSE:
                held.add(lane.job_type)
                continue
            chosen.append(run)
            if room is not None:
                budget[lane.job_type] = room - 1
            still.append(lane)
        turns = still
        chunk = min(limit, chunk * 2)
    return Selection(chosen, held)


def head_of(priority: int, scheduled_at: Any) -> tuple[int, Any]:
    """A lane's turn order from its first due run (as transitions.claim_order orders runs)."""
    return (-priority, scheduled_at)
