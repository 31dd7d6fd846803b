"""What bounds one claim of a job type: the line of wake-ups its executors have not taken yet, its concurrency
limits (in all, per tenant, per concurrency key) and its start rate. The stores count what is in flight inside
the claim (on SQLite in its transaction; on MongoDB just before it, where only the elected scheduler claims) and
ask this module how much room there is and which runs may go; a run a limit holds back stays pending.

Concurrency counts every run of the type that is claimed and not finished (queued, claimed, running): a slot is
taken by the claim and given back when the run ends, is cancelled, or is recovered by the reaper once its lease
ran out (a crashed executor's slot comes back with its lease, never sooner, so it is never granted twice).

The start rate is a GCRA (generic cell rate algorithm): one start every `interval` (per / starts), up to `burst`
back to back. Its state is two times per type: how far the claims have reserved starts (claims pace themselves by
it: a run gets a start time, and its wake-up is held until then), and how far the starts themselves have gone,
which the executor's start checks exactly in the store, so that a wake-up delivered late (an executor killed,
a rebalance) cannot start early or in a bunch: it waits for its turn. A rate per concurrency key keeps the same two
times for each (type, tenant, key) that has started lately: the claim reads a key's reservations when it first
meets one of its runs and passes the key over when it has no start within reach (its other keys go on), and the
start checks the key's own starts beside the type's. A key's times that have fallen behind the clock say nothing
a missing one would not (any start is allowed), so they are pruned.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Protocol

from jobsched.limits import Limits, Rate

# Claims reserve starts of a rate-limited type this far ahead (their wake-ups are held until their time).
RATE_CLAIM_AHEAD_S = 1.0


@dataclass(frozen=True)
class ClaimLimits:
    """`queued`: at most this many runs claimed, due and not yet started (a claim beyond it would only lengthen the
    line in front of a job claimed later; a run claimed ahead of its time waits for it in its executor, in no one's
    line, so it counts once due); `active`, `per_tenant`, `per_key`: at most this many claimed, queued or running
    at once, in all, of one tenant, of one (tenant, concurrencyKey); `rate`: starts per period; `key_rate`: starts
    per period of one (tenant, concurrencyKey)."""

    queued: int | None = None
    active: int | None = None
    per_tenant: int | None = None
    per_key: int | None = None
    rate: Rate | None = None
    key_rate: Rate | None = None

    @classmethod
    def of(cls, limits: Limits, queued: int | None) -> ClaimLimits:
        return cls(
            queued=queued,
            active=limits.concurrency,
            per_tenant=limits.concurrency_per_tenant,
            per_key=limits.concurrency_per_key,
            rate=limits.rate,
            key_rate=limits.rate_per_key,
        )

    @property
    def bounds_concurrency(self) -> bool:
        return self.active is not None or self.per_tenant is not None or self.per_key is not None

    @property
    def counts_by_owner(self) -> bool:
        return self.per_tenant is not None or self.per_key is not None or self.key_rate is not None

    def room(self, queued: int, active: int) -> int | None:
        """How many runs a claim may take given the counts now (before the rate); None: no bound. The line of
        queued runs is topped up once half of it has been taken, not run by run: each claim is a write of its own,
        and many small ones would take the store's turns from the executors that work the line off."""
        rooms: list[int] = []
        if self.queued is not None:
            rooms.append(self.queued - queued if queued <= self.queued // 2 else 0)
        if self.active is not None:
            rooms.append(self.active - active)
        return max(0, min(rooms)) if rooms else None


def rated_types(job_types: Collection[str], limits: Mapping[str, ClaimLimits]) -> dict[str, Rate]:
    """The types of the claim with a start rate, and their rates."""
    return {t: rate for t in job_types if t in limits and (rate := limits[t].rate) is not None}


# One in-flight count as the stores read it: (jobType, tenantId, concurrencyKey, queued and due?, how many).
InFlightRow = tuple[str, str, "str | None", bool, int]


class InFlight:
    """The runs claimed and not finished, counted by type, by (type, tenant) and by (type, tenant, key)."""

    def __init__(self, rows: Iterable[InFlightRow]) -> None:
        self.queued: Counter[str] = Counter()
        self.active: Counter[str] = Counter()
        self.by_tenant: Counter[tuple[str, str]] = Counter()
        self.by_key: Counter[tuple[str, str, str]] = Counter()
        for job_type, tenant, key, queued, n in rows:
            self.active[job_type] += n
            if queued:
                self.queued[job_type] += n
            self.by_tenant[(job_type, tenant)] += n
            if key is not None:
                self.by_key[(job_type, tenant, key)] += n

    def rooms(self, job_types: Collection[str], limits: Mapping[str, ClaimLimits]) -> dict[str, int | None]:
        return {t: limits[t].room(self.queued[t], self.active[t]) for t in job_types if t in limits}

    def full_keys(self, limits: ClaimLimits, job_type: str, tenant: str) -> set[str]:
        """The tenant's concurrency keys of the type already at their limit."""
        if limits.per_key is None:
            return set()
        owner = (job_type, tenant)
        return {k for (t, n, k), count in self.by_key.items() if (t, n) == owner and count >= limits.per_key}


class OwnedLane(Protocol):
    @property
    def job_type(self) -> str: ...
    @property
    def tenant_id(self) -> str: ...


class KeyedRun(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def concurrencyKey(self) -> str | None: ...  # the job's field, as the stores name it


class TypedRun(Protocol):
    """A claimed run as the start rates read it (a Job, or the fields of its wake-up)."""

    @property
    def id(self) -> str: ...
    @property
    def jobType(self) -> str: ...  # the job's field, as the stores name it


class Verdict(Enum):
    TAKE = "take"
    SKIP = "skip"  # this run's key is at its concurrency limit: the lane goes on with its other keys
    # This run's key has no start within the claim's reach under its rate: the lane goes on with its other keys, and
    # the type is not held for it (the key's turn comes with time, which the next tick sees, not with a slot).
    WAIT = "wait"
    CLOSE = "close"  # the run's tenant is at its limit: its lane is done for this claim

    @property
    def passed_over(self) -> bool:
        return self in (Verdict.SKIP, Verdict.WAIT)


# A (jobType, tenantId, concurrencyKey): what a limit per key counts by.
KeyOwner = tuple[str, str, str]


class Admission:
    """The per-tenant and per-key limits during one claim: each run taken counts, so a claim never takes a tenant
    or a key past its limit. `full_keys` is shared with the lanes' reads, which leave those keys' runs out."""

    def __init__(
        self,
        limits: Mapping[str, ClaimLimits],
        in_flight: InFlight,
        key_rates: KeyReservations | None = None,
    ) -> None:
        self._limits = limits
        self._by_tenant = Counter(in_flight.by_tenant)
        self._by_key = Counter(in_flight.by_key)
        self._full: dict[tuple[str, str], set[str]] = {}
        self._in_flight = in_flight
        self.key_rates = key_rates or KeyReservations(lambda owner: 0.0, 0.0, 0.0)
        # Types of which this claim filled a tenant's or a key's slots: whatever of theirs it then leaves out (the
        # lanes' reads skip those keys unseen) waits for a slot, so the scheduler retries them soon, as held ones.
        self.filled: set[str] = set()

    def full_keys(self, job_type: str, tenant: str) -> set[str]:
        """The (live) set of the tenant's keys of the type at their limit."""
        found = self._full.get((job_type, tenant))
        if found is None:
            limits = self._limits.get(job_type)
            found = self._in_flight.full_keys(limits, job_type, tenant) if limits is not None else set()
            self._full[(job_type, tenant)] = found
        return found

    def admit_run(self, lane: OwnedLane, run: KeyedRun) -> Verdict:
        """admit for a lane's run (fair_selection's callback)."""
        return self.admit(lane.job_type, lane.tenant_id, run.concurrencyKey, run.id)

    def admit(self, job_type: str, tenant: str, key: str | None, run_id: str = "") -> Verdict:
        limits = self._limits.get(job_type)
        if limits is None or not limits.counts_by_owner:
            return Verdict.TAKE
        if limits.per_tenant is not None and self._by_tenant[(job_type, tenant)] >= limits.per_tenant:
            return Verdict.CLOSE
        if limits.per_key is not None and key is not None and self._by_key[(job_type, tenant, key)] >= limits.per_key:
            self.full_keys(job_type, tenant).add(key)
            return Verdict.SKIP
        if (
            limits.key_rate is not None
            and key is not None
            # Under a concurrency limit a run claimed ahead of its key's turn would hold a slot while it waits: such
            # a type's runs are claimed only at their key's turn (the next tick sees the next one).
            and not self.key_rates.reserve(
                (job_type, tenant, key), limits.key_rate, run_id, ahead=not limits.bounds_concurrency
            )
        ):
            self.full_keys(job_type, tenant).add(key)
            return Verdict.WAIT
        if limits.per_key is not None and key is not None:
            self._by_key[(job_type, tenant, key)] += 1
            if self._by_key[(job_type, tenant, key)] >= limits.per_key:
                self.full_keys(job_type, tenant).add(key)
                self.filled.add(job_type)
        self._by_tenant[(job_type, tenant)] += 1
        if limits.per_tenant is not None and self._by_tenant[(job_type, tenant)] >= limits.per_tenant:
            self.filled.add(job_type)
        return Verdict.TAKE


class KeyReservations:
    """The starts a claim reserves under a rate per key: a key's reservations so far are read (`reserved`, from the
    store) when the claim first meets one of its runs; each run taken gets the key's next start, no later than
    `until`. The reservations to record are in `tats`, the runs that may not start at `now` in `not_before`."""

    def __init__(self, reserved: Callable[[KeyOwner], float], now: float, until: float) -> None:
        self._reserved = reserved
        self._read: dict[KeyOwner, float] = {}
        self._now = now
        self._until = max(until, now + RATE_CLAIM_AHEAD_S)
        self.tats: dict[KeyOwner, float] = {}
        self.not_before: dict[str, datetime] = {}
        self.waited: set[str] = set()  # types of which a run was passed over for its key's rate

    def reserve(self, owner: KeyOwner, rate: Rate, run_id: str, *, ahead: bool = True) -> bool:
        """The key's next start for the run, if it has one within reach (`ahead`: up to `until`; else only one it
        may take now). (A run the claim then loses to a concurrent claimer leaves its start reserved and unused: a
        key may start a little later, never sooner.)"""
        if owner not in self._read:
            self._read[owner] = self._reserved(owner)
        tat = self.tats.get(owner, self._read[owner])
        times = start_times(tat, self._now, rate, self._until if ahead else self._now, 1)
        if not times:
            self.waited.add(owner[0])
            return False
        self.tats[owner] = reserved_until(tat, times, rate)
        if times[0] > self._now:
            self.not_before[run_id] = datetime.fromtimestamp(times[0], UTC)
        return True


def latest(*times: Mapping[str, datetime]) -> dict[str, datetime]:
    """Per run, the latest of the start times given it (by the type's rate, by its key's)."""
    merged: dict[str, datetime] = {}
    for each in times:
        for run_id, at in each.items():
            merged[run_id] = max(at, merged.get(run_id, at))
    return merged


def start_times(tat: float, now: float, rate: Rate, until: float, n: int) -> list[float]:
    """The times (unix seconds) of up to `n` more starts reserved after `tat` (the reservations so far), none
    later than `until`."""
    interval, tolerance = rate.interval_s, (rate.burst - 1) * rate.interval_s
    times: list[float] = []
    while len(times) < n:
        start = max(now, tat - tolerance)
        if start > until:
            break
        times.append(start)
        tat = max(tat, start) + interval
    return times


def reserved_until(tat: float, starts: Iterable[float], rate: Rate) -> float:
    """The reservations' time after these starts were reserved (in order) from `tat`."""
    for start in starts:
        tat = max(tat, start) + rate.interval_s
    return tat


@dataclass(frozen=True)
class RatePlan:
    """A claim's starts of its rate-limited types: the reservations so far (`reserved`, unix s by type) and the
    start times a claim may give (`start_at`), from which the claim's room for each such type follows."""

    rated: Mapping[str, Rate]
    reserved: Mapping[str, float]
    start_at: Mapping[str, list[float]]

    @classmethod
    def of(cls, rated: Mapping[str, Rate], reserved: Mapping[str, float], now: float, until: float, n: int) -> RatePlan:
        """Up to `n` start times per type, none later than `until` or RATE_CLAIM_AHEAD_S from now."""
        until = max(until, now + RATE_CLAIM_AHEAD_S)
        times = {t: start_times(reserved.get(t, 0.0), now, rate, until, n) for t, rate in rated.items()}
        return cls(rated, reserved, times)

    def bound(self, rooms: dict[str, int | None]) -> None:
        """Each rate-limited type's room in `rooms` is at most its start times."""
        for job_type, times in self.start_at.items():
            room = rooms.get(job_type)
            rooms[job_type] = len(times) if room is None else min(room, len(times))

    def reserve(self, jobs: Sequence[TypedRun], now: float) -> tuple[dict[str, float], dict[str, datetime]]:
        """The claimed runs' start times, in claim order: the reservations to record (by type), and the runs that
        may not start at `now` with their time (their wake-ups are held until then)."""
        tats: dict[str, float] = {}
        not_before: dict[str, datetime] = {}
        for job_type, rate in self.rated.items():
            runs = [j for j in jobs if j.jobType == job_type]
            if not runs:
                continue
            times = self.start_at[job_type][: len(runs)]
            tats[job_type] = reserved_until(self.reserved.get(job_type, 0.0), times, rate)
            not_before.update(
                (j.id, datetime.fromtimestamp(t, UTC)) for j, t in zip(runs, times, strict=True) if t > now
            )
        return tats, not_before


def start_allowed(tat: float, now: float, rate: Rate) -> tuple[bool, float]:
    """Whether a start at `now` keeps to the rate given the starts so far (`tat`): (True, the new tat) or
    (False, the earliest time a start would)."""
    tolerance = (rate.burst - 1) * rate.interval_s
    # No further than the current rate lets starts reach: starts made under a slower rate since relaxed would
    # otherwise hold the type back for the old interval.
    tat = min(tat, now + rate.burst * rate.interval_s)
    if tat - now <= tolerance:
        return True, max(tat, now) + rate.interval_s
    return False, tat - tolerance
