"""The history's per-minute counters (shared/store/history.py), on every store: the same figures as counting the
attempt records and the jobs, per minute, tenant and type; the backlog sampled once a minute."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from functools import reduce

import pytest

from shared.model import Job, Outcome, Status, utc_now
from shared.store.base import JobStore
from shared.store.browse import JobBrowser
from shared.store.history import LATENESS_BUCKETS, MinuteCounts, lateness_bucket, quantile, unix_minute
from tests.contract.store_kit import claim_one, new, reload, result, start
from tests.support import backend_beside

FAILED = {Outcome.FAILED, Outcome.TIMEOUT, Outcome.LOST}
# (tenant, type, seconds late when started, what its one attempt does, maxAttempts)
PLAN = [
    ("acme", "mail", 0, "succeed", 3),
    ("acme", "mail", 0.3, "succeed", 3),
    ("acme", "mail", 7, "fail", 3),  # back to pending: a failed attempt, no ending
    ("acme", "mail", 40, "fail", 1),  # dead-lettered
    ("acme", "report", 2, "lost", 1),  # the reaper's: a lost attempt, dead-lettered
    ("acme", "report", 0, "succeed", 3),
    ("globex", "mail", 0.05, "succeed", 3),
    ("globex", "mail", 120, "lost", 3),
]


@pytest.fixture
def browser(store: JobStore) -> JobBrowser:
    return backend_beside(store).browser


def run_the_plan(store: JobStore) -> list[Job]:
    now = utc_now()
    made = [
        store.create(new(tenantId=t, jobType=j, scheduledAt=now - timedelta(seconds=late), maxAttempts=attempts))
        for t, j, late, _, attempts in PLAN
    ]
    claimed = {j.id: j for j in store.claim_due_jobs(utc_now(), 1000, {"mail", "report"})}
    for job, (*_, does, _) in zip(made, PLAN, strict=True):
        running = start(store, claimed[job.id])
        if does == "lost":
            assert store.recover_attempt(running, "lost in a test") is not None
        else:
            outcome = Outcome.SUCCEEDED if does == "succeed" else Outcome.FAILED
            assert store.finish_attempt(running, result(outcome, None if does == "succeed" else "boom")) is not None
    return made


def counted_from_records(
    store: JobStore, jobs: list[Job], tenant: str | None, job_type: str | None
) -> dict[int, MinuteCounts]:
    """What the history must say, counted from each job's attempt records and its status now, by minute."""
    minutes: dict[int, MinuteCounts] = defaultdict(MinuteCounts)
    for created in jobs:
        if tenant not in (None, created.tenantId) or job_type not in (None, created.jobType):
            continue
        job = reload(store, created)
        for attempt in store.list_executions(job.id):
            assert attempt.startedAt is not None
            assert attempt.finishedAt is not None
            counts = minutes[unix_minute(attempt.startedAt)]
            counts.started += 1
            late_ms = (attempt.startedAt - created.scheduledAt).total_seconds() * 1000
            counts.lateness[lateness_bucket(late_ms)] += 1
            if attempt.outcome in FAILED:
                minutes[unix_minute(attempt.finishedAt)].failed += 1
        if job.status is Status.COMPLETED:
            minutes[unix_minute(job.updatedAt)].completed += 1
        elif job.status is Status.DLQ:
            minutes[unix_minute(job.updatedAt)].dlq += 1
    return minutes


def assert_history_matches(
    browser: JobBrowser, expected: dict[int, MinuteCounts], since: datetime, tenant: str | None, job_type: str | None
) -> None:
    until = utc_now()
    history = browser.history(tenant, job_type, since, until)
    first = unix_minute(since)
    assert len(history.minutes) == unix_minute(until) - first + 1
    got = {first + i: m for i, m in enumerate(history.minutes) if m != MinuteCounts()}
    assert got == {m: c for m, c in expected.items() if c != MinuteCounts()}


def test_the_history_counts_what_the_attempt_records_say(store: JobStore, browser: JobBrowser) -> None:
    since = utc_now() - timedelta(minutes=5)
    jobs = run_the_plan(store)
    for tenant in ("acme", "globex", None):
        for job_type in ("mail", "report", None):
            expected = counted_from_records(store, jobs, tenant, job_type)
            assert_history_matches(browser, expected, since, tenant, job_type)
    everything = reduce(add_up, browser.history(None, None, since, utc_now()).minutes, MinuteCounts())
    assert (everything.started, everything.completed, everything.failed, everything.dlq) == (8, 4, 4, 2)
    assert quantile(everything.lateness, 0.5) is not None


def test_a_schedules_own_end_is_not_a_jobs_outcome(store: JobStore, browser: JobBrowser) -> None:
    since = utc_now() - timedelta(minutes=1)
    template = store.create(new(tenantId="acme", jobType="mail", cron="0 2 * * *"))
    assert store.dead_letter_template(template, "its schedule no longer parses")
    assert reload(store, template).status is Status.DLQ
    done = start(store, claim_one(store, store.create(new(tenantId="acme", jobType="mail"))))
    assert store.finish_attempt(done, result(Outcome.SUCCEEDED)) is not None
    minutes = browser.history("acme", "mail", since, utc_now()).minutes
    assert (sum(m.dlq for m in minutes), sum(m.completed for m in minutes)) == (0, 1)
    assert browser.counts("acme", since).lastHour["mail"].dlq == 0  # the overview's last hour agrees


def add_up(total: MinuteCounts, minute: MinuteCounts) -> MinuteCounts:
    total.add(minute)
    return total


def test_lateness_reads_as_the_bound_of_its_bucket() -> None:
    assert lateness_bucket(-5) == lateness_bucket(0) == lateness_bucket(1) == 0
    assert lateness_bucket(1.5) == 1
    assert lateness_bucket(10**9) == LATENESS_BUCKETS - 1
    buckets = [0] * LATENESS_BUCKETS
    buckets[lateness_bucket(3)] = 98  # at most 5 ms
    buckets[lateness_bucket(700)] = 2  # at most 1,000 ms
    assert (quantile(buckets, 0.5), quantile(buckets, 0.98), quantile(buckets, 0.99)) == (5, 5, 1000)
    assert quantile([0] * LATENESS_BUCKETS, 0.5) is None


def test_the_backlog_is_sampled_once_a_minute(store: JobStore, browser: JobBrowser) -> None:
    now = utc_now()
    for _ in range(2):
        store.create(new(tenantId="acme", jobType="mail", scheduledAt=now - timedelta(seconds=5)))
    store.create(new(tenantId="acme", jobType="mail", scheduledAt=now + timedelta(hours=1)))  # not due
    claim_one(store, store.create(new(tenantId="acme", jobType="report")))  # queued: due, not started
    start(store, claim_one(store, store.create(new(tenantId="globex", jobType="sync"))))  # running
    sampled_at = utc_now()
    assert store.sample_backlog(sampled_at) is True
    assert store.sample_backlog(sampled_at) is False  # once a minute

    def minute(tenant: str | None, job_type: str | None) -> tuple[int, int]:
        [last] = browser.history(tenant, job_type, sampled_at, sampled_at).minutes
        return last.waiting, last.running

    assert minute("acme", "mail") == (2, 0)
    assert minute("acme", None) == (3, 0)
    assert minute("globex", "sync") == (0, 1)
    assert minute(None, None) == (3, 1)


def test_every_tenants_history_reads_the_same_once_summed(store: JobStore, browser: JobBrowser) -> None:
    """Every tenant's minutes read the same before and after the reaper's sample has added them up (on SQLite the
    sums are kept apart, a day's rows per type; on MongoDB every flush adds to them)."""
    since = utc_now() - timedelta(minutes=5)
    run_the_plan(store)
    before = browser.history(None, None, since, utc_now())
    assert store.sample_backlog(utc_now() + timedelta(minutes=2))  # sums every minute up to the next one
    after = browser.history(None, None, since, before.until)
    assert after == before
    assert sum(m.started for m in after.minutes) == len(PLAN)
