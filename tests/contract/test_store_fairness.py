"""The store contract, on every implementation: tenants take turns in claims, and a type's room bounds them."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from shared.model import Job, Outcome, Status, utc_now
from shared.store.base import AttemptResult, JobStore
from shared.store.claim_limits import ClaimLimits
from tests.contract.conftest import Harness
from tests.contract.store_kit import LEASE, new, start


def backlog(store: JobStore, tenant: str, count: int, **fields: Any) -> list[Job]:
    return [j for j in store.create_many([new(tenantId=tenant, **fields) for _ in range(count)]) if isinstance(j, Job)]


def test_a_tenants_one_due_run_is_claimed_in_the_first_round_behind_another_tenants_backlog(store: JobStore) -> None:
    now = utc_now()
    backlog(store, "big", 60, scheduledAt=now - timedelta(minutes=10))
    small = store.create(new(tenantId="small", scheduledAt=now))
    first = store.claim_due_jobs(now, 2, {"noop"})
    assert [j.tenantId for j in first] == ["big", "small"]  # the longer-waiting lane first, then the other
    assert first[1].id == small.id


def test_tenants_take_turns_and_each_keeps_its_own_claim_order(store: JobStore) -> None:
    now = utc_now()
    made: dict[str, list[Job]] = {}
    for tenant in ("a", "b", "c"):
        made[tenant] = [
            store.create(new(tenantId=tenant, priority=p, scheduledAt=now - timedelta(seconds=s)))
            for p, s in ((0, 30), (5, 10), (5, 20), (0, 40))
        ]
    claimed = store.claim_due_jobs(now, 9, {"noop"})
    assert len(claimed) == 9
    for turn in range(3):
        assert sorted(j.tenantId for j in claimed[turn * 3 : turn * 3 + 3]) == ["a", "b", "c"]
    for tenant, jobs in made.items():
        expected = [jobs[2], jobs[1], jobs[3]]  # priority 5 oldest first, then priority 0 oldest first
        assert [j.id for j in claimed if j.tenantId == tenant] == [j.id for j in expected]


def test_a_higher_priority_does_not_let_a_tenant_take_another_tenants_turn(store: JobStore) -> None:
    now = utc_now()
    backlog(store, "loud", 20, priority=100)
    quiet = store.create(new(tenantId="quiet", priority=0))
    claimed = store.claim_due_jobs(now, 2, {"noop"})
    assert [j.tenantId for j in claimed] == ["loud", "quiet"]  # the priority-100 lane's turn comes first
    assert claimed[1].id == quiet.id


def test_lanes_are_per_type_too_and_a_claim_of_one_takes_the_lane_waiting_longest(store: JobStore) -> None:
    now = utc_now()
    store.create(new(tenantId="a", jobType="x", scheduledAt=now - timedelta(seconds=5)))
    oldest = store.create(new(tenantId="a", jobType="y", scheduledAt=now - timedelta(seconds=50)))
    [claimed] = store.claim_due_jobs(now, 1, {"x", "y"})
    assert claimed.id == oldest.id


def test_many_small_claims_of_several_backlogs_take_every_run_once_and_alternate_tenants(store: JobStore) -> None:
    now = utc_now()
    runs = {t: backlog(store, t, n) for t, n in (("a", 120), ("b", 40), ("c", 5))}
    claims = []
    while claimed := store.claim_due_jobs(now, 7, {"noop"}):
        claims.append(claimed)
    order = [j for claim in claims for j in claim]
    assert Counter(j.id for j in order) == Counter(j.id for jobs in runs.values() for j in jobs)
    # While every tenant has due runs, each claim gives each its turn before any gets another.
    for claim in claims[:2]:
        assert sorted(Counter(j.tenantId for j in claim).values()) == [2, 2, 3]
    assert all(j.status is Status.QUEUED for j in order)


def test_a_type_gets_no_more_than_its_room_and_says_it_held_runs_back(store: JobStore) -> None:
    now = utc_now()
    backlog(store, "a", 10, jobType="limited")
    backlog(store, "a", 3, jobType="free")
    limits = {"limited": ClaimLimits(queued=4)}
    first = store.claim_due_jobs(now, 100, {"limited", "free"}, limits=limits)
    assert Counter(j.jobType for j in first) == {"limited": 4, "free": 3}
    assert first.held == {"limited"}
    assert store.claim_due_jobs(now, 100, {"limited", "free"}, limits=limits) == []  # four still queued
    started = [j for j in first if j.jobType == "limited"][:2]
    start(store, started[0])
    assert store.claim_due_jobs(now, 100, {"limited"}, limits=limits) == []  # the line is topped up at half
    start(store, started[1])
    again = store.claim_due_jobs(now, 100, {"limited"}, limits=limits)
    assert len(again) == 2  # two of four taken: the line is filled again
    assert again.held == {"limited"}


def test_runs_claimed_ahead_of_their_time_join_the_line_only_once_due(store: JobStore) -> None:
    """A claim takes runs due within its lookahead; their executor holds them until their time, in no one's line,
    so the line bounds only what is due and waiting (at 200 jobs/s, runs 1 s ahead filled a line of 64 and the
    claims fell behind by a minute)."""
    now = utc_now()
    soon = now + timedelta(milliseconds=500)
    for n in range(6):
        store.create(new(f"ahead-{n}", jobType="ahead", scheduledAt=soon))
    limits = {"ahead": ClaimLimits(queued=4)}
    lookahead = now + timedelta(seconds=1)
    first = store.claim_due_jobs(now, 100, {"ahead"}, due_by=lookahead, limits=limits)
    assert len(first) == 4
    second = store.claim_due_jobs(now, 100, {"ahead"}, due_by=lookahead, limits=limits)
    assert len(second) == 2  # the four claimed are not due yet: the line is empty
    later = soon + timedelta(milliseconds=1)
    for n in range(3):
        store.create(new(f"then-{n}", jobType="ahead", scheduledAt=later))
    held = store.claim_due_jobs(later, 100, {"ahead"}, limits=limits)
    assert held == []  # now due and not started, the six claimed fill the line
    assert held.held == {"ahead"}


def test_an_active_limit_counts_queued_and_running_runs_until_they_end(store: JobStore) -> None:
    now = utc_now()
    backlog(store, "a", 3, jobType="capped")
    backlog(store, "b", 3, jobType="capped")
    limits = {"capped": ClaimLimits(active=2)}
    first = store.claim_due_jobs(now, 10, {"capped"}, limits=limits)
    assert sorted(j.tenantId for j in first) == ["a", "b"]  # the two slots go one to each tenant
    running = start(store, first[0], "w1", now + LEASE)
    assert store.claim_due_jobs(now, 10, {"capped"}, limits=limits) == []
    store.cancel(first[1].id)  # a queued run cancelled gives its slot back
    assert len(store.claim_due_jobs(now, 10, {"capped"}, limits=limits)) == 1
    assert store.claim_due_jobs(now, 10, {"capped"}, limits=limits) == []
    store.finish_attempt(running, AttemptResult(Outcome.SUCCEEDED, now, utc_now()))  # its end gives its slot back
    assert len(store.claim_due_jobs(now, 10, {"capped"}, limits=limits)) == 1


def test_no_room_and_nothing_due_is_no_hold(store: JobStore) -> None:
    now = utc_now()
    claimed = store.claim_due_jobs(now, 10, {"idle"}, limits={"idle": ClaimLimits(queued=0)})
    assert claimed == []
    assert claimed.held == frozenset()
    store.create(new(jobType="idle"))
    claimed = store.claim_due_jobs(now, 10, {"idle"}, limits={"idle": ClaimLimits(queued=0)})
    assert claimed == []
    assert claimed.held == {"idle"}


def finish(store: JobStore, job: Job, now: datetime) -> None:
    running = start(store, job, "w1", now + LEASE)
    store.finish_attempt(running, AttemptResult(Outcome.SUCCEEDED, now, utc_now()))


def test_a_freed_slot_of_a_limited_type_goes_to_the_tenant_whose_turn_it_is(store: JobStore) -> None:
    now = utc_now()
    limits = {"one-at-a-time": ClaimLimits(active=1)}
    backlog(store, "a", 10, jobType="one-at-a-time", scheduledAt=now - timedelta(minutes=10))
    [first] = store.claim_due_jobs(now, 10, {"one-at-a-time"}, limits=limits)
    assert first.tenantId == "a"
    late = [store.create(new(tenantId="b", jobType="one-at-a-time", scheduledAt=now)) for _ in range(2)]
    assert store.claim_due_jobs(now, 10, {"one-at-a-time"}, limits=limits) == []  # the one slot is a's
    finish(store, first, now)
    # a's lane has the oldest runs and b's one is newer, but the slot a had last is b's turn now.
    [second] = store.claim_due_jobs(now, 10, {"one-at-a-time"}, limits=limits)
    assert second.id == late[0].id
    served = [second]
    for _ in range(4):
        finish(store, served[-1], now)
        [claimed] = store.claim_due_jobs(now, 10, {"one-at-a-time"}, limits=limits)
        served.append(claimed)
    assert [j.tenantId for j in served] == ["b", "a", "b", "a", "a"]  # in turn while both have due runs


def test_a_scheduler_that_takes_over_does_not_give_a_freed_slot_back_to_the_tenant_that_held_it(
    harness: Harness,
) -> None:
    store = harness.store
    now = utc_now()
    limits = {"one-at-a-time": ClaimLimits(active=1)}
    backlog(store, "a", 5, jobType="one-at-a-time", scheduledAt=now - timedelta(minutes=10))
    [first] = store.claim_due_jobs(now, 10, {"one-at-a-time"}, limits=limits)
    late = store.create(new(tenantId="b", jobType="one-at-a-time", scheduledAt=now))
    successor = harness.open()  # the new leader: it has given no turns yet
    assert successor.claim_due_jobs(now, 10, {"one-at-a-time"}, limits=limits) == []  # a's job holds the slot
    finish(store, first, now)
    # a's runs are the oldest, but a had the last turn (the slot it held): the slot is b's.
    [second] = successor.claim_due_jobs(now, 10, {"one-at-a-time"}, limits=limits)
    assert second.id == late.id


def test_with_more_lanes_than_a_claim_takes_a_newly_due_tenant_is_in_the_next_claim(harness: Harness) -> None:
    store = harness.store
    now = utc_now()
    tenants = [f"t{n:02}" for n in range(30)]
    for tenant in tenants:
        backlog(store, tenant, 6, scheduledAt=now - timedelta(minutes=10))
    claims = [store.claim_due_jobs(now, 4, {"noop"})]  # a claim reaches 4 of the 30 lanes
    newcomer = store.create(new(tenantId="new", scheduledAt=now))
    claims.append(store.claim_due_jobs(now, 4, {"noop"}))
    assert newcomer.id in {j.id for j in claims[-1]}
    # Round after round, the claims go on from the lanes the last one did not reach: every tenant has a turn
    # before any has a second, wherever its runs stand in time.
    while len(claims) < 9:
        claims.append(store.claim_due_jobs(now, 4, {"noop"}))
    turns = [j.tenantId for claim in claims for j in claim if j.tenantId != "new"]
    assert sorted(turns[:30]) == tenants
    later = store.create(new(tenantId="later", scheduledAt=now))
    assert later.id in {j.id for j in store.claim_due_jobs(now, 4, {"noop"})}
    # A scheduler that takes over remembers no turns: it starts from the lanes' first runs, and a tenant whose
    # runs become due after its first claim still goes ahead of the lanes that claim did not reach.
    successor = harness.open()
    successor.claim_due_jobs(now, 4, {"noop"})
    after_takeover = store.create(new(tenantId="after-takeover", scheduledAt=now))
    assert after_takeover.id in {j.id for j in successor.claim_due_jobs(now, 4, {"noop"})}


def test_runs_changed_after_a_claim_read_them_are_claimed_as_they_are_now(store: JobStore) -> None:
    """A claim may read a lane's next runs ahead of its turns (MongoDB does), but what it moves is what is pending
    and due when it moves it: a run cancelled or rescheduled since the read is passed over, one rescheduled back
    in time is claimed again, and every other run is claimed once, each tenant's in its claim order."""
    now = utc_now()
    lanes = {t: backlog(store, t, 6, scheduledAt=now - timedelta(minutes=1)) for t in ("a", "b", "c")}
    claimed = [*store.claim_due_jobs(now, 3, {"noop"}), *store.claim_due_jobs(now, 3, {"noop"})]
    store.cancel(lanes["a"][2].id)
    moved = store.update_if_unmoved(lanes["b"][2], {"scheduledAt": now + timedelta(hours=1)})
    assert moved is not None
    while taken := store.claim_due_jobs(now, 3, {"noop"}):
        claimed.extend(taken)
    assert Counter(j.id for j in claimed) == Counter(
        j.id for t, jobs in lanes.items() for j in jobs if j.id not in {lanes["a"][2].id, lanes["b"][2].id}
    )
    ids = {j.id for j in claimed}
    for tenant, jobs in lanes.items():
        assert [j.id for j in claimed if j.tenantId == tenant] == [j.id for j in jobs if j.id in ids]
    assert store.update_if_unmoved(moved, {"scheduledAt": now - timedelta(minutes=1)}) is not None
    assert [j.id for j in store.claim_due_jobs(now, 3, {"noop"})] == [lanes["b"][2].id]
