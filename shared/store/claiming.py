"""A claim, planned once for every store: the steps that turn due runs into queued jobs, over a small port.

A claim sizes each type's room (its runs in flight against its concurrency limits, its start rate's reservations
so far), reads the lanes of due runs of the types with room, lets the tenants take turns (fair_claims.py) within
the limits (claim_limits.py), moves the chosen runs to queued, and records the start times it gave rate-limited
runs. Those steps and their order are written here only; a store supplies the reads and the two writes of a
ClaimPort (its claims.py), and fair_claims.py and claim_limits.py stay pure.

Atomicity is the store's: a port whose writes run in one transaction that makes its reads a compare-and-set
(SQLite's write lock) reads everything again inside it (`rereads_to_write`), and answers a claim that has no room
from a read alone, without taking a write turn; a port without one (MongoDB) guards its move to queued instead
(only runs still due and pending move) and says which runs it won.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Protocol, TypeVar

from jobsched.limits import Rate
from shared.model import Job
from shared.store.claim_limits import (
    Admission,
    ClaimLimits,
    InFlight,
    KeyedRun,
    KeyOwner,
    KeyReservations,
    RatePlan,
    latest,
    rated_types,
)
from shared.store.fair_claims import Claim, ClaimedRows, Lane, Selection, Turns, fair_selection

R = TypeVar("R", bound=KeyedRun)  # a due run as the store reads it: its id and concurrency key


class ClaimReads(Protocol[R]):
    """What a claim reads of a store."""

    def in_flight(self, job_types: Collection[str], now: datetime) -> InFlight:
        """The runs of these types claimed and not finished, counted; queued ones in the line once due by `now`."""
        ...

    def reserved_starts(self, rated: Mapping[str, Rate]) -> Mapping[str, float]:
        """How far the claims of each rate-limited type have reserved its starts (unix seconds; absent: never);
        asked only when a type of the claim has a start rate."""
        ...

    def reserved_key_starts(self, owner: KeyOwner) -> float:
        """The same for one (type, tenant, concurrency key) under a rate per key (0: never)."""
        ...

    def has_due_run(self, job_type: str, due: datetime) -> bool:
        """Whether a run of the type is pending and due by `due` (a type without room holds it back)."""
        ...

    def lanes(self, job_type: str, due: datetime, full_keys: Callable[[str], set[str]]) -> list[Lane[R]]:
        """The type's lanes with a run due by `due`, one per tenant; a lane's reads leave out the runs of its
        tenant's `full_keys(tenant)` (concurrency keys at their limit, a set the claim may grow as it goes)."""
        ...


class ClaimWrites(ClaimReads[R], Protocol[R]):
    """What a claim writes: the chosen runs moved to queued, and the start times it reserved."""

    def mark_queued(
        self, runs: Sequence[R], now: datetime, due: datetime
    ) -> tuple[Sequence[Job], Collection[str] | None]:
        """Move the chosen runs to queued (those still pending and due by `due`): the jobs moved, in the runs'
        order, and the ids won when some of the runs were not (None: every one was). The jobs are read only after
        the transaction (but inside it when a type of the claim has a start rate), so a store may convert them
        only when read."""
        ...

    def reserve_starts(self, by_type: Mapping[str, float], by_key: Mapping[KeyOwner, float]) -> None:
        """Record how far the claim reserved the starts of each rate-limited type and each key under a rate."""
        ...


class ClaimPort(Protocol[R]):
    @property
    def rereads_to_write(self) -> bool:
        """True when `writing` is one transaction that keeps what it reads true until it commits: a claim then
        reads everything inside it, and answers a claim without room from `reading` alone."""
        ...

    def reading(self) -> AbstractContextManager[ClaimReads[R]]: ...

    def writing(self) -> AbstractContextManager[ClaimWrites[R]]: ...


@dataclass(frozen=True)
class _Ask:
    """What a claim was asked for."""

    turns: Turns
    now: datetime
    due: datetime
    limit: int
    job_types: Collection[str]
    limits: Mapping[str, ClaimLimits]


@dataclass(frozen=True)
class _Sizing:
    """Each type's room for this claim, from its runs in flight and its start rate's reservations."""

    in_flight: InFlight
    rooms: dict[str, int | None]
    rates: RatePlan
    full: set[str]  # the types with no room at all

    @classmethod
    def read(cls, reads: ClaimReads[R], ask: _Ask) -> _Sizing:
        in_flight = reads.in_flight(sorted(t for t in ask.job_types if t in ask.limits), ask.now)
        ask.turns.in_flight(in_flight.by_tenant)
        rooms = in_flight.rooms(ask.job_types, ask.limits)
        rated = rated_types(ask.job_types, ask.limits)
        reserved = reads.reserved_starts(rated) if rated else {}  # most claims: no type has a rate, no read
        rates = RatePlan.of(rated, reserved, ask.now.timestamp(), ask.due.timestamp(), ask.limit)
        rates.bound(rooms)
        return cls(in_flight, rooms, rates, {t for t in ask.job_types if rooms.get(t) == 0})


def claim_due_runs(
    port: ClaimPort[R],
    turns: Turns,
    now: datetime,
    limit: int,
    job_types: Collection[str],
    due_by: datetime | None = None,
    limits: Mapping[str, ClaimLimits] | None = None,
) -> Claim:
    """Up to `limit` due runs of `job_types` (due by `due_by`, default `now`) moved to queued, within `limits`,
    tenants taking turns as `turns` remembers them (the claimer's own memory, updated once the claim is made)."""
    if limit <= 0 or not job_types:
        return Claim()
    ask = _Ask(turns, now, due_by or now, limit, job_types, limits or {})
    if port.rereads_to_write and all(t in ask.limits for t in job_types):
        # Every type limited: no room for any (the usual case of a claim again soon) is answered without a write.
        with port.reading() as reads:
            sizing = _Sizing.read(reads, ask)
            if sizing.full == set(job_types):
                held = {t for t in job_types if reads.has_due_run(t, ask.due)}
                return Claim((), held, in_use=sizing.in_flight.active)
    with port.writing() as writes:
        claim, selection, won = _claim(writes, ask)
    turns.took(selection, won)  # the writes are made: the turns given are the runs moved
    return claim()


def _claim(writes: ClaimWrites[R], ask: _Ask) -> tuple[Callable[[], Claim], Selection[R], Collection[str] | None]:
    """The claim's reads and writes; the Claim is made by the callable returned, once the transaction is over."""
    sizing = _Sizing.read(writes, ask)
    held = {t for t in sizing.full if writes.has_due_run(t, ask.due)}
    key_rates = KeyReservations(writes.reserved_key_starts, ask.now.timestamp(), ask.due.timestamp())
    admission = Admission(ask.limits, sizing.in_flight, key_rates)
    lanes = [
        lane
        for job_type in sorted(set(ask.job_types) - sizing.full)
        for lane in writes.lanes(job_type, ask.due, partial(admission.full_keys, job_type))
    ]
    selection = fair_selection(lanes, ask.limit, sizing.rooms, admission.admit_run, ask.turns)
    jobs, won = writes.mark_queued(selection.runs, ask.now, ask.due) if selection.runs else ([], None)
    # The runs' wake-up fields where the store has them apart (its jobs are read only after the transaction).
    runs = jobs.claimed() if isinstance(jobs, ClaimedRows) else jobs
    tats, not_before = sizing.rates.reserve(runs, ask.now.timestamp())
    if tats or key_rates.tats:
        writes.reserve_starts(tats, key_rates.tats)
    claim = partial(
        Claim,
        jobs,
        held | selection.held | admission.filled,
        not_before=latest(not_before, key_rates.not_before),
        in_use=sizing.in_flight.active,
        waited=key_rates.waited,
    )
    return claim, selection, won
