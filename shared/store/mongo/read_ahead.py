"""A claim's lanes read ahead on MongoDB: a lane the claim gets to is read for up to READ_AHEAD_RUNS runs, and the
runs the claim does not take stay in memory for the lane's next turns, so that a claim over many tenants reads
each lane once per several of its turns, not once per turn.

Why: a lane's read is a round trip whatever it returns, and on FerretDB 2 (DocumentDB) it also walks the index
entries of every due run of the type, so it costs the same for 1 run as for 64 (17 ms with 60,000 due runs, 40 ms
with 100,000). A claim of 64 runs over 100 tenants takes one run of each of 64 lanes, so it made 64 such reads:
about 50 runs a second in the hot second's burst (docs/performance.md). On MongoDB the reads cost what they
return, and the read-ahead saves their round trips.

The runs kept serve until the lane's turns have taken them, bounded by READ_AHEAD_S only as a staleness limit: a
memory that expired by a short clock expired before the lane's next turn whenever a claim went round many lanes
slowly (100 tenants at 18 runs a second: a turn every 5.5 s), and every turn read again, which is what made the
claim slow. A lane the claim's listing no longer names (its runs claimed, cancelled or moved) is forgotten.

Where every lane's read walks the whole backlog (DocumentDB), the lanes a claim meets for the first time are read
together (read_together): one walk for all of them instead of one per lane. A burst of 100,000 runs of 100 tenants
cost its first claim 100 reads of 81 ms each; read together, 1.3 s.

What it changes: within a lane, runs read ahead go before a run of higher priority written after they were read
(at most READ_AHEAD_RUNS of the same tenant's runs, for at most READ_AHEAD_S). Nothing else: which lanes have due
runs is listed afresh by every claim, and the claim's move is guarded, so a run cancelled, rescheduled or claimed
since it was read is never moved (the claim takes fewer). The memory is the claimer's own, like its turns.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from shared.model import Job
from shared.store.fair_claims import LaneId, LaneReader

# A known lane's read takes this many runs at least: on DocumentDB a read of 16 costs what a read of 1 does, and
# 16 runs of one tenant are as far as a run of higher priority written after them may wait.
READ_AHEAD_RUNS: Final = 16
# How long runs read ahead may be served at most: far longer than a lane waits for its turn in any claim that goes
# round its lanes (the memory must outlast 16 turns, or every turn reads), short enough that a run changed since
# (a priority raised, a run of higher priority written) waits behind the runs read before it for no longer.
READ_AHEAD_S: Final = 30.0
# Runs kept in all, over every lane (each a job without its history: a few KB).
READ_AHEAD_KEPT: Final = 4096

# A store's read of a lane: (lane, due by, concurrency keys left out, after this run or None, at most n).
LaneRead = Callable[[LaneId, datetime, frozenset[str], Job | None, int], list[Job]]
# A store's read of several lanes of one type at once, none of their keys left out: (job type, tenants, due by, at
# most n runs each) → each tenant's first runs in claim order (a tenant without due runs absent).
LanesRead = Callable[[str, Sequence[str], datetime, int], Mapping[str, list[Job]]]


@dataclass
class _Ahead:
    """A lane's runs read and not yet chosen, in claim order, as read by `due` without the runs of `left_out`."""

    runs: list[Job]
    due: datetime
    left_out: frozenset[str]
    read_at: float

    def fresh(self, now: float) -> bool:
        return now - self.read_at <= READ_AHEAD_S

    def serves(self, due: datetime, left_out: frozenset[str], now: float) -> bool:
        """Whether these runs serve a claim due by `due` leaving out `left_out`: read lately, all due by then (read
        by an earlier due), and without a key the claim would take (runs of a key full since are passed over by
        the claim's admission)."""
        return self.fresh(now) and self.due <= due and self.left_out <= left_out

    def holds_due(self, due: datetime) -> bool:
        return any(run.scheduledAt <= due for run in self.runs)

    def after(self, run: Job | None) -> list[Job] | None:
        """The runs after `run` (from the first when None); None when `run` is not among them."""
        if run is None:
            return self.runs
        for i, kept in enumerate(self.runs):
            if kept.id == run.id:
                return self.runs[i + 1 :]
        return None


class LaneReadAhead:
    """The lanes' runs read ahead, kept between claims (module docstring). `read` is the store's lane read."""

    def __init__(
        self, read: LaneRead, *, read_many: LanesRead | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._read = read
        self._read_many = read_many
        self._clock = clock
        self._lanes: dict[LaneId, _Ahead] = {}
        self._lock = threading.Lock()

    def reader(self, lane: LaneId, due: datetime, full_keys: Collection[str]) -> LaneReader[Job]:
        """The lane's reader for one claim (fair_claims.Lane.read). `full_keys` is the claim's set of the tenant's
        keys at their limit, which it may grow as it goes: each read leaves out those of the moment."""

        def read(after: Job | None, n: int) -> list[Job]:
            return self._runs(lane, due, frozenset(full_keys), after, n)

        return read

    def read_together(self, job_type: str, tenants: Collection[str], due: datetime) -> None:
        """Read the first runs of these lanes of `job_type` in one read and keep them, as many of each as the memory
        has room for (at most READ_AHEAD_RUNS): their readers then answer from memory. Lanes with runs kept are
        not read again; fewer than two lanes to read are left to their readers. For a store whose lane reads each
        walk the whole backlog; the lanes' tenants must have no key left out."""
        now = self._clock()
        with self._lock:
            unread = [t for t in tenants if not self._kept_for((job_type, t), due, now)]
            room = self._room()
        each = min(READ_AHEAD_RUNS, room // len(unread)) if unread else 0
        if self._read_many is None or len(unread) < 2 or each < 1:
            return
        for tenant, runs in self._read_many(job_type, unread, due, each).items():
            self._keep((job_type, tenant), _Ahead(runs, due, frozenset(), now))

    def _kept_for(self, lane: LaneId, due: datetime, now: float) -> bool:
        """Whether runs of the lane are kept that serve a claim due by `due` with no key left out; under the lock."""
        ahead = self._lanes.get(lane)
        return ahead is not None and bool(ahead.runs) and ahead.serves(due, frozenset(), now)

    def holds(self, job_type: str, due: datetime) -> bool:
        """Whether runs of the type due by `due` were read lately and not taken: a type without room holds due runs
        back (the claim's answer that makes the scheduler claim again soon) without a read. Runs cancelled since
        would only make it claim again before its next period."""
        now = self._clock()
        with self._lock:
            return any(
                lane[0] == job_type and ahead.fresh(now) and ahead.holds_due(due) for lane, ahead in self._lanes.items()
            )

    def listed(self, job_type: str, tenants: Collection[str]) -> None:
        """A claim listed the type's lanes with due runs: the others' runs kept are gone (claimed, cancelled, moved)."""
        named = set(tenants)
        with self._lock:
            for lane in [lane for lane in self._lanes if lane[0] == job_type and lane[1] not in named]:
                del self._lanes[lane]

    def taken(self, runs: Sequence[Job]) -> None:
        """The runs a claim chose (moved or lost to a concurrent change): never served again."""
        ids = {run.id for run in runs}
        with self._lock:
            for lane in _lanes_of(runs):
                if (ahead := self._lanes.get(lane)) is not None:
                    ahead.runs = [run for run in ahead.runs if run.id not in ids]
                    if not ahead.runs:
                        del self._lanes[lane]

    def _runs(self, lane: LaneId, due: datetime, left_out: frozenset[str], after: Job | None, n: int) -> list[Job]:
        now = self._clock()
        with self._lock:
            ahead = self._lanes.get(lane)
            if ahead is not None and not ahead.serves(due, left_out, now):
                ahead = None
            kept = ahead.after(after) if ahead is not None else None
            if kept is not None and len(kept) >= n:
                return kept[:n]
            room = self._room()
        if after is not None and kept is None:
            # The claim is past runs this memory does not hold (it started the lane before they were read, or
            # they expired): read on without keeping, since what the claim holds and leaves is not known here.
            return self._read(lane, due, left_out, after, n)
        # Read ahead while there is room to keep what is read (a new leader meeting thousands of lanes reads each
        # for its first run only, once the memory is full).
        ahead_n = max(n, READ_AHEAD_RUNS) if room > 0 else n
        runs = self._read(lane, due, left_out, after, ahead_n)
        if ahead is not None and kept is not None:  # extended: its first runs keep their age
            before = ahead.runs[: len(ahead.runs) - len(kept)]
            self._keep(lane, _Ahead([*before, *runs], due, left_out, ahead.read_at))
        else:
            self._keep(lane, _Ahead(runs, due, left_out, now))
        return runs[:n]

    def forget(self, runs: Sequence[Job]) -> None:
        """The lanes of these runs are read afresh (a claim's move failed: which of them moved is not known)."""
        with self._lock:
            for lane in _lanes_of(runs):
                self._lanes.pop(lane, None)

    def _room(self) -> int:
        """How many more runs may be kept (without purging the expired ones); under the lock."""
        return READ_AHEAD_KEPT - sum(len(a.runs) for a in self._lanes.values())

    def _keep(self, lane: LaneId, ahead: _Ahead) -> None:
        with self._lock:
            self._lanes.pop(lane, None)
            room = self._room()
            if room < len(ahead.runs):
                now = self._clock()
                expired = [k for k, a in self._lanes.items() if not a.fresh(now)]
                for k in expired:
                    room += len(self._lanes.pop(k).runs)
            if room > 0 and ahead.runs:
                ahead.runs = ahead.runs[:room]  # the lane's next runs: the rest is read again when it gets there
                self._lanes[lane] = ahead


def _lanes_of(runs: Sequence[Job]) -> set[LaneId]:
    return {(run.jobType, run.tenantId) for run in runs}
