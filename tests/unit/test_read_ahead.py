"""A claim's lanes read ahead on MongoDB (read_ahead.LaneReadAhead): a lane's runs read once serve the next claims,
in claim order, until they are taken, expire, their lane is no longer listed, or a claim needs runs they may lack
(an earlier due time, a key no longer at its limit); a claim past what is kept reads on without keeping; what is
kept is bounded."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from shared.model import Job, Status
from shared.store.fair_claims import LaneId
from shared.store.mongo import read_ahead
from shared.store.mongo.read_ahead import READ_AHEAD_RUNS, READ_AHEAD_S, LaneReadAhead
from tests.support import MovedClock

DUE = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
LANE: LaneId = ("noop", "tenant-a")


def run(n: int, key: str | None = None, tenant: str = "tenant-a") -> Job:
    at = DUE - timedelta(seconds=100 - n)
    return Job(
        id=f"{n:024x}",
        idempotencyKey=f"k-{n}",
        tenantId=tenant,
        jobType="noop",
        status=Status.PENDING,
        scheduledAt=at,
        createdAt=at,
        updatedAt=at,
        concurrencyKey=key,
    )


class Store:
    """A lane's pending runs in claim order, read as MongoDB reads them: due, keys left out, after a run; the reads
    it answered are counted."""

    def __init__(self, runs: list[Job]) -> None:
        self.pending = runs
        self.reads: list[tuple[str | None, int]] = []

    def read(self, lane: LaneId, due: datetime, left_out: frozenset[str], after: Job | None, n: int) -> list[Job]:
        self.reads.append((after.id if after else None, n))
        order = [j for j in self.pending if j.scheduledAt <= due and j.concurrencyKey not in left_out]
        start = 0 if after is None else next(i + 1 for i, j in enumerate(order) if j.id == after.id)
        return order[start : start + n]

    def claim(self, lanes: LaneReadAhead, n: int, due: datetime = DUE, full: set[str] | None = None) -> list[Job]:
        """A claim that takes the lane's next n runs, read one at a time as a claim over many lanes does."""
        read = lanes.reader(LANE, due, full if full is not None else set())
        taken: list[Job] = []
        for _ in range(n):
            [next_run] = read(taken[-1] if taken else None, 1)
            taken.append(next_run)
        lanes.taken(taken)
        self.pending = [j for j in self.pending if j not in taken]
        return taken


def test_a_lane_read_once_serves_its_next_turns_in_claim_order_until_its_runs_are_taken() -> None:
    store = Store([run(n) for n in range(40)])
    lanes = LaneReadAhead(store.read)
    taken = [job for _ in range(READ_AHEAD_RUNS) for job in store.claim(lanes, 1)]
    assert taken == [run(n) for n in range(READ_AHEAD_RUNS)]
    assert store.reads == [(None, READ_AHEAD_RUNS)]  # one read for 16 turns
    assert store.claim(lanes, 1) == [run(READ_AHEAD_RUNS)]  # the runs kept are spent: read again
    assert store.reads[1:] == [(None, READ_AHEAD_RUNS)]


def test_a_claim_that_goes_past_the_runs_kept_extends_them_and_keeps_the_ones_it_did_not_take() -> None:
    store = Store([run(n) for n in range(60)])
    lanes = LaneReadAhead(store.read)
    read = lanes.reader(LANE, DUE, set())
    first = read(None, 10)
    beyond = read(first[-1], 10)  # 6 kept are too few: read on from the claim's last run
    assert [*first, *beyond] == [run(n) for n in range(20)]
    assert store.reads == [(None, READ_AHEAD_RUNS), (run(9).id, READ_AHEAD_RUNS)]
    lanes.taken(first[:3])  # the claim ended after three runs: the others stay the lane's next
    store.pending = store.pending[3:]
    assert lanes.reader(LANE, DUE, set())(None, 2) == [run(3), run(4)]
    assert len(store.reads) == 2


def test_a_claim_past_runs_it_did_not_get_from_the_memory_reads_on_without_keeping() -> None:
    store = Store([run(n) for n in range(40)])
    lanes = LaneReadAhead(store.read)
    assert lanes.reader(LANE, DUE, set())(run(5), 2) == [run(6), run(7)]
    assert store.reads == [(run(5).id, 2)]
    assert lanes.reader(LANE, DUE, set())(None, 1) == [run(0)]  # nothing was kept: runs 0-5 are not skipped
    assert store.reads[1] == (None, READ_AHEAD_RUNS)


def test_runs_kept_serve_turns_that_come_slowly_and_expire() -> None:
    store, clock = Store([run(n) for n in range(40)]), MovedClock()
    lanes = LaneReadAhead(store.read, clock=clock)
    for turn in range(4):  # a claim going round many lanes slowly: a turn of this one every 6 s
        clock.now = turn * 6.0
        store.claim(lanes, 1)
    assert len(store.reads) == 1
    clock.now = READ_AHEAD_S + 0.1
    store.claim(lanes, 1)
    assert len(store.reads) == 2


def test_a_lane_the_listing_no_longer_names_is_forgotten() -> None:
    store = Store([run(n) for n in range(40)])
    lanes = LaneReadAhead(store.read)
    store.claim(lanes, 1)
    lanes.listed("noop", {"tenant-a", "tenant-b"})
    lanes.listed("other", set())  # another type's listing leaves this one's lanes alone
    assert lanes.holds("noop", DUE)
    lanes.listed("noop", {"tenant-b"})  # its runs were cancelled, or claimed by another
    assert not lanes.holds("noop", DUE)
    store.claim(lanes, 1)
    assert len(store.reads) == 2


def test_a_full_memory_reads_no_more_than_the_claim_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(read_ahead, "READ_AHEAD_KEPT", READ_AHEAD_RUNS)
    runs = {t: [run(n, tenant=t) for n in range(40)] for t in ("t0", "t1")}
    reads: list[int] = []

    def read(lane: LaneId, due: datetime, left_out: frozenset[str], after: Job | None, n: int) -> list[Job]:
        reads.append(n)
        return runs[lane[1]][:n]

    lanes = LaneReadAhead(read)
    lanes.reader(("noop", "t0"), DUE, set())(None, 1)
    lanes.reader(("noop", "t1"), DUE, set())(None, 1)  # a new leader meeting more lanes than it may keep
    assert reads == [READ_AHEAD_RUNS, 1]


def test_runs_kept_serve_no_claim_they_may_not_answer_in_full() -> None:
    store = Store([run(n, key="k1" if n % 2 else None) for n in range(40)])
    lanes = LaneReadAhead(store.read)
    store.claim(lanes, 1, full={"k1"})  # read without the runs of k1, which is at its limit
    store.claim(lanes, 1, full={"k1", "k2"})  # more keys full: the runs kept serve (the claim passes over k2's)
    assert len(store.reads) == 1
    assert store.claim(lanes, 1) == [run(1, key="k1")]  # k1 has room again: its runs were not read
    assert len(store.reads) == 2
    store.claim(lanes, 1, due=DUE - timedelta(seconds=1))  # an earlier due time: the runs kept may not be due
    assert len(store.reads) == 3


def test_what_is_kept_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(read_ahead, "READ_AHEAD_KEPT", 20)
    tenants = [f"t{n}" for n in range(3)]
    runs = [run(n, tenant=t) for t in tenants for n in range(READ_AHEAD_RUNS)]
    lanes = LaneReadAhead(lambda lane, due, left_out, after, n: [r for r in runs if r.tenantId == lane[1]][:n])
    for tenant in tenants:
        lanes.reader(("noop", tenant), DUE, set())(None, 1)
    kept = [len(lanes.reader(("noop", t), DUE, set())(None, READ_AHEAD_RUNS)) for t in tenants]
    assert kept == [READ_AHEAD_RUNS] * 3  # what was not kept is read again
    assert sum(len(a.runs) for a in lanes._lanes.values()) <= 20


def test_runs_kept_tell_that_their_type_holds_due_runs_until_taken_or_expired() -> None:
    store, clock = Store([run(n) for n in range(2)]), MovedClock()
    lanes = LaneReadAhead(store.read, clock=clock)
    assert not lanes.holds("noop", DUE)
    store.claim(lanes, 1)
    assert lanes.holds("noop", DUE)
    assert not lanes.holds("other", DUE)
    assert not lanes.holds("noop", run(0).scheduledAt)  # the run kept is due later than that
    clock.now = READ_AHEAD_S + 0.1
    assert not lanes.holds("noop", DUE)
    clock.now = 0.0
    store.claim(lanes, 1)
    assert not lanes.holds("noop", DUE)


def test_runs_kept_past_a_claims_reach_expire_with_the_first_read_and_a_failed_move_forgets_the_lane() -> None:
    store, clock = Store([run(n) for n in range(60)]), MovedClock()
    lanes = LaneReadAhead(store.read, clock=clock)
    read = lanes.reader(LANE, DUE, set())
    first = read(None, 10)
    clock.now = READ_AHEAD_S - 1
    read(first[-1], 10)  # extends what is kept: runs read 4 s apart
    clock.now = READ_AHEAD_S + 0.1
    lanes.reader(LANE, DUE, set())(None, 1)
    assert len(store.reads) == 3  # the first read's age counts for all of them
    lanes.forget([run(0)])
    lanes.reader(LANE, DUE, set())(None, 1)
    assert len(store.reads) == 4


class Lanes:
    """Several tenants' lanes of one type, read one at a time or together; each read recorded."""

    def __init__(self, tenants: list[str], runs: int = 40) -> None:
        self.pending = {t: [run(n, tenant=t) for n in range(runs)] for t in tenants}
        self.reads: list[str] = []
        self.together: list[tuple[list[str], int]] = []

    def read(self, lane: LaneId, due: datetime, left_out: frozenset[str], after: Job | None, n: int) -> list[Job]:
        self.reads.append(lane[1])
        order = self.pending[lane[1]]
        start = 0 if after is None else next(i + 1 for i, j in enumerate(order) if j.id == after.id)
        return order[start : start + n]

    def read_many(self, job_type: str, tenants: Sequence[str], due: datetime, n: int) -> dict[str, list[Job]]:
        self.together.append((list(tenants), n))
        return {t: self.pending[t][:n] for t in tenants if self.pending[t]}


def test_lanes_read_together_serve_their_turns_without_a_read_each() -> None:
    store = Lanes(["t0", "t1", "t2"])
    lanes = LaneReadAhead(store.read, read_many=store.read_many)
    lanes.read_together("noop", ["t0", "t1", "t2"], DUE)
    assert store.together == [(["t0", "t1", "t2"], READ_AHEAD_RUNS)]
    for tenant in ("t0", "t1", "t2"):
        read = lanes.reader(("noop", tenant), DUE, set())
        first = read(None, 1)
        assert first + read(first[0], 3) == store.pending[tenant][:4]
    assert store.reads == []  # every turn so far answered from what was read together


def test_lanes_with_runs_kept_are_not_read_together_again_nor_a_lane_alone() -> None:
    store = Lanes(["t0", "t1", "t2"])
    lanes = LaneReadAhead(store.read, read_many=store.read_many)
    lanes.reader(("noop", "t0"), DUE, set())(None, 1)
    lanes.read_together("noop", ["t0", "t1", "t2"], DUE)
    assert store.together == [(["t1", "t2"], READ_AHEAD_RUNS)]  # t0's runs were kept already
    lanes.read_together("noop", ["t0", "t1", "t2"], DUE - timedelta(seconds=1))  # a due time they may not serve
    assert store.together[1:] == [(["t0", "t1", "t2"], READ_AHEAD_RUNS)]
    store.together.clear()
    lanes.listed("noop", {"t1", "t2", "t3"})
    lanes.read_together("noop", ["t1", "t2", "t3"], DUE + timedelta(seconds=1))
    assert store.together == []  # one lane to read (t3): its reader reads it


def test_lanes_read_together_take_what_the_memory_has_room_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(read_ahead, "READ_AHEAD_KEPT", 20)
    store = Lanes(["t0", "t1", "t2"])
    lanes = LaneReadAhead(store.read, read_many=store.read_many)
    lanes.read_together("noop", ["t0", "t1", "t2"], DUE)
    assert store.together == [(["t0", "t1", "t2"], 6)]
    lanes.read_together("noop", ["t0", "t1", "t2"], DUE + timedelta(seconds=1))  # kept: nothing to read
    monkeypatch.setattr(read_ahead, "READ_AHEAD_KEPT", 19)
    lanes.listed("noop", set())
    lanes.read_together("noop", [f"t{n}" for n in range(20)], DUE)
    assert len(store.together) == 1  # no room for one run of each: each lane is read by its reader
