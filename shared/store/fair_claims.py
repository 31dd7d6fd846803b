"""Which due runs a claim takes, and in what order: tenants take turns.

Due runs are grouped in lanes, one per tenant and job type. A claim visits the lanes in rounds and takes the next
run of each lane in turn, so a tenant with a backlog of a hundred thousand runs and a tenant with one due run
share a claim: the one run goes within the first round, not after the backlog. Within a lane runs keep the claim
order (priority desc, then scheduledAt asc): priority orders a tenant's own runs, never one tenant before another.

Which lane goes first is the claimer's memory of the turns it gave (Turns): lanes take their turns in the order
they last had one, least recently first, and a lane it has not given a turn goes before every lane it has. So a
claim too small for one round goes on, in the next claim, from the lanes it did not reach, and a freed slot of a
limited type goes to the tenant whose turn it is, never back to the backlog that had the last one; a tenant whose
runs become due goes first in the next claim however many lanes wait (unless it had a turn since the waiting lanes
had theirs). (Ordering lanes by their first due run instead gives every turn a claim cannot go round to the lanes
waiting longest: a backlog's, while it lasts.) The memory is the elected scheduler's own: a new leader starts with
none but the lanes with runs in flight, which it counts as served lately, takes its first claim in the order of
the other lanes' first due runs (priority, then how long due) and remembers the lanes it left waiting there, so
that a lane which becomes due after it started still goes before them.

A type may have less room than the claim (claim_limits.py: wake-ups its executors have not taken yet, its
concurrency limits, its start rate): its lanes stop taking runs when its room is spent and the other types' lanes
go on; a run whose tenant or concurrency key is at its limit is passed over (the lane goes on with its other keys,
or ends for this claim when the tenant is full), as is a run whose key's start rate has no start within reach.

Stores supply the lanes (which tenants have due runs of each type, found from an index, never by reading every
due run) and read each lane's runs in chunks, only as far as the claim gets; this module only chooses.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Generic, NamedTuple, Protocol, TypeVar, overload, runtime_checkable

from shared.model import Job
from shared.store.claim_limits import Verdict


class Due(Protocol):
    """A due run as a store reads it for choosing (a Job, or a few columns of it)."""

    @property
    def id(self) -> str: ...


R = TypeVar("R", bound=Due)
# A lane's runs due by the claim's time, in claim order, after the given run (None: from the first), at most n.
LaneReader = Callable[[R | None, int], list[R]]
LaneId = tuple[str, str]  # (jobType, tenantId)
# Lanes whose last turns are remembered: far more than have due runs at once. The ones forgotten first are those
# whose turn was longest ago, which go first anyway (a forgotten lane goes before every remembered one).
TURNS_REMEMBERED: Final = 50_000


@dataclass
class Lane(Generic[R]):
    """The due runs of one tenant and job type, read on demand."""

    job_type: str
    tenant_id: str
    # Claim-order key of its first due run, (-priority, scheduledAt) (head_of): its turn among the lanes the
    # claimer has not given a turn yet. None only for a lane the Turns know (its turn comes from them), which a
    # store may then leave unread, due runs or not, until the claim gets to it.
    head: tuple[int, Any] | None
    read: LaneReader[R]
    buffered: list[R] = field(default_factory=list)  # read ahead, next run last (a store may pass the first)
    _last: R | None = None
    _exhausted: bool = False

    @property
    def id(self) -> LaneId:
        return (self.job_type, self.tenant_id)

    def next_run(self, chunk: int) -> R | None:
        if not self.buffered and not self._exhausted:
            self.buffered = self.read(self._last, chunk)
            self._exhausted = len(self.buffered) < chunk
            self.buffered.reverse()  # pop() from the end: the next run in claim order
        if not self.buffered:
            return None
        self._last = self.buffered.pop()
        return self._last


class Claimed(NamedTuple):
    """What a claimed job's wake-up carries (the executor's start reads the rest of the job)."""

    id: str
    jobType: str
    priority: int
    tenantId: str
    scheduledAt: datetime
    next_attempt: int
    claimToken: str | None
    traceparent: str | None = None  # the context the job was created in: a traced claim links to it

    @classmethod
    def of(cls, job: Job) -> Claimed:
        return cls(
            job.id,
            job.jobType,
            job.priority,
            job.tenantId,
            job.scheduledAt,
            job.next_attempt,
            job.claimToken,
            job.traceparent,
        )


@runtime_checkable
class ClaimedRows(Protocol):
    """A store's claimed rows that tell their wake-ups' fields without making whole jobs of them."""

    def claimed(self) -> list[Claimed]: ...


class Claim(Sequence[Job]):
    """The jobs a claim won, in the order they were chosen; the types whose room held due runs back (the
    scheduler claims again soon rather than at its next period: their room comes back as their runs start and
    end, not when new runs are written); the start time given to runs of a rate-limited type that may not start
    at once (their wake-ups are held until then); the runs of each limited type in flight before the claim; and
    the types of which the claim passed runs over for their concurrency key's start rate (`waited`: not held, as
    their turn comes with time). The jobs are the store's sequence as it gave them: one that converts its rows
    when they are read (SQLite's) converts none for `claimed()`, all the scheduler reads of a claim it publishes."""

    def __init__(
        self,
        jobs: Iterable[Job] = (),
        held: Iterable[str] = (),
        *,
        not_before: Mapping[str, datetime] | None = None,
        in_use: Mapping[str, int] | None = None,
        waited: Iterable[str] = (),
    ) -> None:
        self._jobs: Sequence[Job] = jobs if isinstance(jobs, Sequence) else list(jobs)
        self.held = frozenset(held)
        self.waited = frozenset(waited)
        self.not_before = dict(not_before or {})
        self.in_use = dict(in_use or {})

    def __len__(self) -> int:
        return len(self._jobs)

    @overload
    def __getitem__(self, index: int) -> Job: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Job]: ...

    def __getitem__(self, index: int | slice) -> Job | Sequence[Job]:
        return self._jobs[index]

    def __iter__(self) -> Iterator[Job]:
        return iter(self._jobs)

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, Claim | list) else NotImplemented

    __hash__ = None  # type: ignore[assignment]  # compared by its jobs, as the list it was

    def __repr__(self) -> str:
        return f"Claim({list(self)!r}, held={set(self.held)!r})"

    def claimed(self) -> list[Claimed]:
        """Each job's wake-up fields, in claim order."""
        if isinstance(self._jobs, ClaimedRows):
            return self._jobs.claimed()
        return [Claimed.of(job) for job in self._jobs]


@dataclass
class Selection(Generic[R]):
    runs: list[R]
    held: set[str]  # types that had due runs beyond their room
    lanes: list[LaneId] = field(default_factory=list)  # the lane of each run
    turns: list[LaneId] = field(default_factory=list)  # the lanes that had room, in their turn order


class Turns:
    """The claimer's memory of the turns it gave: for each lane, a ticket of its last turn (its last run taken; the
    tickets grow with each run), least recently served first. A lane without a ticket has had none from this
    claimer and goes first of all, in the order of its first due run. A lane the claimer met with a due run and
    left waiting (its claim ran out before its turn, or passed it over at a limit) without ever serving it gets a
    ticket below every served lane's, in the order it waited in: it keeps its place ahead of the lanes served
    since, and a lane becoming due later still goes before it.

    Per claimer, in memory: the elected scheduler is the only claimer (on SQLite, a second process claiming the
    same file keeps turns of its own), and a new leader starts from the runs in flight (in_flight) and the lanes'
    first due runs (Lane.head)."""

    def __init__(self, remembered: int = TURNS_REMEMBERED) -> None:
        self._remembered = remembered
        self._served = 0  # the last run's ticket
        self._waited = -(2**62)  # the tickets of lanes left waiting: below every served ticket
        self._last: dict[LaneId, int] = {}
        self._lock = threading.Lock()

    def knows(self, lane: LaneId) -> bool:
        return lane in self._last

    def order(self, lanes: Iterable[Lane[R]]) -> list[Lane[R]]:
        """The lanes in turn order: those without a ticket first, by their heads, then the others by ticket."""
        fresh: list[Lane[R]] = []
        known: list[tuple[int, Lane[R]]] = []
        with self._lock:
            for lane in lanes:
                ticket = self._last.get(lane.id)
                if ticket is None:
                    fresh.append(lane)
                else:
                    known.append((ticket, lane))
        known.sort(key=lambda each: each[0])
        return sorted(fresh, key=_head) + [lane for _, lane in known]

    def in_flight(self, lanes: Iterable[LaneId]) -> None:
        """The lanes with runs claimed and not finished, as a claim counts them (before it chooses, full types
        included). One this claimer has no ticket for had its turn from another claimer, lately (the leader before
        it; on SQLite, another process): it gets a ticket after every lane's so far, so that a new leader does not
        give a freed slot back to the tenant that held it because its runs are the oldest."""
        with self._lock:
            for lane in sorted(set(lanes) - self._last.keys()):
                self._served += 1
                self._last[lane] = self._served

    def took(self, selection: Selection[R], won: Collection[str] | None = None) -> None:
        """After a claim wrote its runs (`won`: the ids it moved, when fewer than chosen): each lane's ticket is
        that of its last run taken; lanes with room that had no turn yet are remembered as waiting, in turn order.
        (A run lost to a concurrent writer between the choice and the write gives no turn.)"""
        with self._lock:
            taken: set[LaneId] = set()
            for run, lane in zip(selection.runs, selection.lanes, strict=True):
                if won is None or run.id in won:
                    self._served += 1
                    self._last[lane] = self._served
                    taken.add(lane)
            for lane in selection.turns:
                if lane not in taken and lane not in self._last:
                    self._waited += 1
                    self._last[lane] = self._waited
            if len(self._last) > self._remembered + self._remembered // 8:
                kept = sorted(self._last.items(), key=lambda item: item[1])[-self._remembered :]
                self._last = dict(kept)


def _head(lane: Lane[Any]) -> tuple[int, Any]:
    assert lane.head is not None, "a lane the turns do not know comes with its first due run"
    return lane.head


def fair_selection(
    lanes: Iterable[Lane[R]],
    limit: int,
    rooms: Mapping[str, int | None],
    admit: Callable[[Lane[R], R], Verdict] | None = None,
    last_turns: Turns | None = None,
) -> Selection[R]:
    """Up to `limit` runs, lanes taking turns (see the module docstring) in the order `last_turns` gives (without
    it, by their heads alone), at most rooms[type] of a type (no bound where the room is None or missing), each run
    `admit`ted (claim_limits.Admission). The runs come in the order they were chosen; the store hands the selection
    to `last_turns.took` once it has written them."""
    budget = dict(rooms)
    held: set[str] = set()
    turns: list[Lane[R]] = []
    for lane in lanes:
        if budget.get(lane.job_type) == 0:
            held.add(lane.job_type)
        else:
            turns.append(lane)
    turns = last_turns.order(turns) if last_turns is not None else sorted(turns, key=_head)
    order = [lane.id for lane in turns]
    # A first read per lane of its share of the claim (of what the types' rooms let it take: a line of 64 wake-ups
    # left of a claim of 500 reads 64 runs, not 500); a lane that has more reads on in larger chunks.
    rooms_left = [budget.get(job_type) for job_type in {lane.job_type for lane in turns}]
    reach = limit if None in rooms_left else min(limit, sum(r for r in rooms_left if r is not None))
    chunk = max(1, -(-reach // max(1, len(turns))))
    chosen: list[R] = []
    chosen_lanes: list[LaneId] = []
    while turns and len(chosen) < limit:
        still: list[Lane[R]] = []
        for lane in turns:
            if len(chosen) == limit:
                break
            room = budget.get(lane.job_type)
            if room == 0 and lane.job_type in held:
                continue  # spent, and known to hold due runs back: nothing to learn from reading the lane
            run = lane.next_run(chunk if room != 0 else 1)  # no room: one run says whether it holds any back
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
            chosen_lanes.append(lane.id)
            if room is not None:
                budget[lane.job_type] = room - 1
            still.append(lane)
        turns = still
        chunk = min(reach, chunk * 2)
    return Selection(chosen, held, chosen_lanes, order)


def head_of(priority: int, scheduled_at: Any) -> tuple[int, Any]:
    """A lane's turn order from its first due run (as transitions.claim_order orders runs)."""
    return (-priority, scheduled_at)
