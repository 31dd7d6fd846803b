"""The store contract, on every implementation: concurrency limits per tenant and per key bound claims, and a
start rate paces claims and is kept exactly by the starts themselves."""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from jobsched.limits import Rate
from shared.model import Job, Outcome, Status, utc_now
from shared.store.base import AttemptResult, AttemptStart, JobStore, RateLimited
from shared.store.claim_limits import ClaimLimits
from tests.contract.store_kit import LEASE, new, reload, start
from tests.support import start_one


def runs(store: JobStore, count: int, **fields: Any) -> list[Job]:
    made = store.create_many([new(**fields) for _ in range(count)])
    return [j for j in made if isinstance(j, Job)]


def finish(store: JobStore, job: Job) -> None:
    running = start(store, job)
    store.finish_attempt(running, AttemptResult(Outcome.SUCCEEDED, utc_now(), utc_now()))


def test_a_key_at_its_limit_is_passed_over_and_the_lane_goes_on_with_other_keys(store: JobStore) -> None:
    now = utc_now()
    runs(store, 30, jobType="keyed", concurrencyKey="busy", scheduledAt=now - timedelta(minutes=5))
    quiet = store.create(new(jobType="keyed", concurrencyKey="quiet", scheduledAt=now))
    free = runs(store, 2, jobType="keyed")  # no key: only the type's other limits apply
    limits = {"keyed": ClaimLimits(per_key=1)}
    claimed = store.claim_due_jobs(now, 100, {"keyed"}, limits=limits)
    assert Counter(j.concurrencyKey for j in claimed) == {"busy": 1, "quiet": 1, None: 2}
    assert quiet.id in {j.id for j in claimed}
    assert {j.id for j in free} <= {j.id for j in claimed}
    assert claimed.held == {"keyed"}
    assert store.claim_due_jobs(now, 100, {"keyed"}, limits=limits) == []
    busy = next(j for j in claimed if j.concurrencyKey == "busy")
    finish(store, busy)  # its slot comes back when it ends
    [again] = store.claim_due_jobs(now, 100, {"keyed"}, limits=limits)
    assert again.concurrencyKey == "busy"


def test_a_key_is_the_tenants_own(store: JobStore) -> None:
    for tenant in ("a", "b"):
        runs(store, 3, tenantId=tenant, jobType="per-key", concurrencyKey="customer-1")
    claimed = store.claim_due_jobs(utc_now(), 100, {"per-key"}, limits={"per-key": ClaimLimits(per_key=2)})
    assert Counter(j.tenantId for j in claimed) == {"a": 2, "b": 2}


def test_a_tenant_at_its_limit_waits_and_the_others_go_on(store: JobStore) -> None:
    for tenant in ("a", "b", "c"):
        runs(store, 5, tenantId=tenant, jobType="shared")
    limits = {"shared": ClaimLimits(active=5, per_tenant=2)}
    claimed = store.claim_due_jobs(utc_now(), 100, {"shared"}, limits=limits)
    assert len(claimed) == 5  # the type's limit
    assert max(Counter(j.tenantId for j in claimed).values()) == 2
    running = [start(store, j) for j in claimed]
    assert store.claim_due_jobs(utc_now(), 100, {"shared"}, limits=limits) == []
    store.finish_attempt(running[0], AttemptResult(Outcome.SUCCEEDED, utc_now(), utc_now()))
    [next_one] = store.claim_due_jobs(utc_now(), 100, {"shared"}, limits=limits)
    counts = Counter(j.tenantId for j in running[1:]) + Counter([next_one.tenantId])
    assert max(counts.values()) <= 2


def test_a_slot_comes_back_when_the_reaper_recovers_a_lost_attempt(store: JobStore) -> None:
    runs(store, 2, jobType="crashy")
    limits = {"crashy": ClaimLimits(active=1)}
    [first] = store.claim_due_jobs(utc_now(), 10, {"crashy"}, limits=limits)
    started = start_one(store, AttemptStart(first.id, "crashy", "dead-worker", utc_now() - timedelta(seconds=1)))
    assert store.claim_due_jobs(utc_now(), 10, {"crashy"}, limits=limits) == []  # held by the dead executor
    [expired] = [j for j in store.expired_attempts(utc_now(), 10) if j.id == started.id]
    store.recover_attempt(expired, "lost")
    claimed = store.claim_due_jobs(utc_now(), 10, {"crashy"}, limits=limits)
    assert len(claimed) == 1  # one slot: the recovered run or the other, never both


def test_a_rate_gives_claimed_runs_start_times_one_interval_apart(store: JobStore) -> None:
    runs(store, 50, jobType="paced")
    rate = Rate(10, per=1.0)
    now = utc_now()
    claimed = store.claim_due_jobs(now, 100, {"paced"}, limits={"paced": ClaimLimits(rate=rate)})
    # Starts reserved up to a second ahead: the first now, then one every 0.1 s.
    assert 10 <= len(claimed) <= 12
    assert claimed.held == {"paced"}
    times = sorted(claimed.not_before.values())
    assert len(times) == len(claimed) - 1  # the first may start at once
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    assert all(gap == pytest.approx(0.1, abs=0.002) for gap in gaps)
    # Those reservations stand: a claim at once finds no start left in its second ahead.
    assert len(store.claim_due_jobs(utc_now(), 100, {"paced"}, limits={"paced": ClaimLimits(rate=rate)})) <= 1


def rated_start(store: JobStore, job: Job, rate: Rate) -> Job | Exception:
    [answer] = store.start_attempts([AttemptStart(job.id, job.jobType, "w1", utc_now() + LEASE, rate=rate)])
    return answer


def test_a_start_keeps_to_the_rate_exactly_and_a_refused_one_writes_nothing(store: JobStore) -> None:
    runs(store, 4, jobType="metered")
    claimed = store.claim_due_jobs(utc_now(), 10, {"metered"})  # claimed without the rate: the starts decide
    rate = Rate(1, per=60.0, burst=2)
    first, second, third = (rated_start(store, j, rate) for j in claimed[:3])
    assert isinstance(first, Job)
    assert isinstance(second, Job)  # the burst of two
    assert isinstance(third, RateLimited)
    assert 50 <= (third.until - utc_now()).total_seconds() <= 61
    assert reload(store, claimed[2]).status is Status.QUEUED
    assert store.list_executions(claimed[2].id) == []


def test_starts_of_one_batch_count_in_order(store: JobStore) -> None:
    runs(store, 3, jobType="batched")
    claimed = store.claim_due_jobs(utc_now(), 10, {"batched"})
    rate = Rate(1, per=60.0)
    answers = store.start_attempts([AttemptStart(j.id, j.jobType, "w1", utc_now() + LEASE, rate=rate) for j in claimed])
    assert [type(a) for a in answers] == [Job, RateLimited, RateLimited]


def test_in_flight_beside_a_job_counts_its_types_runs_by_tenant_and_key(store: JobStore) -> None:
    runs(store, 2, tenantId="a", jobType="counted", concurrencyKey="k1")
    runs(store, 1, tenantId="b", jobType="counted")
    waiting = store.create(new(tenantId="a", jobType="counted", concurrencyKey="k1", scheduledAt=utc_now() + LEASE))
    claimed = store.claim_due_jobs(utc_now(), 10, {"counted"})
    start(store, claimed[0])
    counts = store.in_flight_beside(waiting)
    assert (counts.active["counted"], counts.queued["counted"]) == (3, 2)
    assert counts.by_tenant[("counted", "a")] == 2
    assert counts.by_key[("counted", "a", "k1")] == 2


def test_a_rate_per_key_paces_each_key_and_passes_over_a_key_with_no_start_in_reach(store: JobStore) -> None:
    now = utc_now()
    runs(store, 20, jobType="per-key-rate", concurrencyKey="busy", scheduledAt=now - timedelta(minutes=5))
    quiet = runs(store, 2, jobType="per-key-rate", concurrencyKey="quiet", scheduledAt=now)
    free = runs(store, 3, jobType="per-key-rate")  # no key: the rate per key does not bind it
    limits = {"per-key-rate": ClaimLimits(key_rate=Rate(1, per=0.75))}
    claimed = store.claim_due_jobs(now, 100, {"per-key-rate"}, limits=limits)
    # Starts reserved up to a second ahead: a key's first now, its second 0.75 s later, its third beyond.
    assert Counter(j.concurrencyKey for j in claimed) == {"busy": 2, "quiet": 2, None: 3}
    assert {j.id for j in quiet + free} <= {j.id for j in claimed}
    later = claimed.not_before
    assert Counter(j.concurrencyKey for j in claimed if j.id in later) == {"busy": 1, "quiet": 1}
    assert all((at - now).total_seconds() == pytest.approx(0.75, abs=0.01) for at in later.values())
    # Not held: the busy key's turn comes with time, which the next tick sees, not with a slot.
    assert claimed.held == frozenset()
    assert claimed.waited == {"per-key-rate"}  # counted as a claim that left due jobs waiting
    assert store.claim_due_jobs(utc_now(), 100, {"per-key-rate"}, limits=limits) == []
    # Another tenant's key of the same name is its own.
    other = runs(store, 1, tenantId="other", jobType="per-key-rate", concurrencyKey="busy")
    assert [j.id for j in store.claim_due_jobs(utc_now(), 100, {"per-key-rate"}, limits=limits)] == [other[0].id]


def key_rated_start(store: JobStore, job: Job, rate: Rate) -> Job | Exception:
    [answer] = store.start_attempts([AttemptStart(job.id, job.jobType, "w1", utc_now() + LEASE, key_rate=rate)])
    return answer


def test_a_start_keeps_to_its_keys_rate_exactly(store: JobStore) -> None:
    runs(store, 3, jobType="key-metered", concurrencyKey="k1")
    runs(store, 1, jobType="key-metered", concurrencyKey="k2")
    runs(store, 2, jobType="key-metered")
    claimed = store.claim_due_jobs(utc_now(), 10, {"key-metered"})  # claimed without limits: the starts decide
    by_key = {key: [j for j in claimed if j.concurrencyKey == key] for key in ("k1", "k2", None)}
    rate = Rate(1, per=60.0)
    first, second, third = (key_rated_start(store, j, rate) for j in by_key["k1"])
    assert isinstance(first, Job)
    assert isinstance(second, RateLimited)
    assert isinstance(third, RateLimited)
    assert 55 <= (second.until - utc_now()).total_seconds() <= 61
    assert reload(store, by_key["k1"][1]).status is Status.QUEUED
    assert store.list_executions(by_key["k1"][1].id) == []
    assert isinstance(key_rated_start(store, by_key["k2"][0], rate), Job)  # each key on its own
    answers = store.start_attempts(
        [AttemptStart(j.id, j.jobType, "w1", utc_now() + LEASE, key_rate=rate) for j in by_key[None]]
    )
    assert [type(a) for a in answers] == [Job, Job]  # no key: not bound


def test_key_rate_times_behind_the_clock_are_pruned_and_recent_ones_kept(store: JobStore) -> None:
    rate = Rate(1, per=60)
    limits = {"pruned": ClaimLimits(key_rate=rate)}
    runs(store, 1, jobType="pruned", concurrencyKey="k1")
    [claimed] = store.claim_due_jobs(utc_now(), 10, {"pruned"}, limits=limits)
    assert isinstance(key_rated_start(store, claimed, rate), Job)
    assert store.prune_key_rates(utc_now(), 100) == 0  # its next start is a minute away: kept
    runs(store, 1, jobType="pruned", concurrencyKey="k1")
    assert store.claim_due_jobs(utc_now(), 10, {"pruned"}, limits=limits) == []  # the kept times still pace it
    assert store.prune_key_rates(utc_now() + timedelta(minutes=2), 100) == 1


def test_under_a_concurrency_limit_a_keys_runs_are_claimed_only_at_its_turn(store: JobStore) -> None:
    runs(store, 5, jobType="slotted", concurrencyKey="busy")
    limits = {"slotted": ClaimLimits(active=10, key_rate=Rate(1, per=0.75))}
    claimed = store.claim_due_jobs(utc_now(), 100, {"slotted"}, limits=limits)
    # Its second start is 0.75 s away: claimed now, it would hold one of the ten slots while it waits.
    assert len(claimed) == 1
    assert claimed.not_before == {}
    assert claimed.waited == {"slotted"}
