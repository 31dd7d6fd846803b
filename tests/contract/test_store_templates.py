"""The store contract, on every implementation: recurring templates and the runs they spawn."""

from __future__ import annotations

import tracemalloc
from datetime import UTC, datetime, timedelta
from functools import partial

from shared.model import Job, Status, run_key, utc_now
from shared.store import transitions
from shared.store.base import JobStore, RunSpec
from tests.contract.conftest import Harness
from tests.contract.store_kit import (
    is_utc_ms,
    new,
    reload,
    together,
)
from tests.support import tenant_jobs


def test_due_templates_are_pending_templates_earliest_first(store: JobStore) -> None:
    now = utc_now()
    late = store.create(new(cron="* * * * *", scheduledAt=now - timedelta(minutes=1)))
    early = store.create(new(interval="1h", scheduledAt=now - timedelta(minutes=2)))
    store.create(new(cron="* * * * *", scheduledAt=now + timedelta(hours=1)))
    store.cancel(store.create(new(cron="* * * * *", scheduledAt=now - timedelta(minutes=3))).id)
    store.create(new(scheduledAt=now - timedelta(minutes=4)))  # a run, not a template
    assert [t.id for t in store.due_templates(now, 10)] == [early.id, late.id]
    assert [t.id for t in store.due_templates(now, 1)] == [early.id]


def test_add_run_inserts_the_run_once_per_planned_time(store: JobStore) -> None:
    template = store.create(
        new("nightly", cron="0 2 * * *", payload={"r": 1}, priority=4, maxAttempts=6, timeoutSeconds=9.5)
    )
    planned = datetime(2030, 1, 1, 2, 0, tzinfo=UTC)
    assert store.add_run(template, RunSpec(planned))[1] is True
    assert store.add_run(template, RunSpec(planned))[1] is False
    assert store.add_run(template, RunSpec(planned + timedelta(days=1)))[1] is True
    runs = [j for j in tenant_jobs(store, "tenant-a", None, 10) if not j.is_template]
    [run] = [r for r in runs if r.scheduledAt == planned]
    assert len(runs) == 2
    assert run.idempotencyKey == run_key("nightly", planned) == f"nightly-run-{1_893_463_200 * 10**9}"
    assert (run.tenantId, run.jobType, run.payload, run.priority) == ("tenant-a", "noop", {"r": 1}, 4)
    assert (run.maxAttempts, run.timeoutSeconds, run.templateId) == (6, 9.5, template.id)
    assert (run.status, run.attempts, run.cron, run.interval) == (Status.PENDING, 0, None, None)
    assert is_utc_ms(run.createdAt)
    assert [j.id for j in store.claim_due_jobs(planned, 10, {"noop"})] == [run.id]  # a run is claimable


def test_add_runs_writes_a_batch_and_answers_each_run_in_order(store: JobStore) -> None:
    template = store.create(new("hourly", cron="0 * * * *", payload={"r": 2}))
    start = datetime(2030, 1, 1, tzinfo=UTC)
    hours = [start + timedelta(hours=h) for h in range(1200)]  # more than one SQLite transaction's worth
    first = store.add_runs(template, [RunSpec(t) for t in hours[:700]])
    assert [created for _, created in first] == [True] * 700
    overlapping = store.add_runs(template, [RunSpec(t) for t in hours[500:]])
    assert [created for _, created in overlapping] == [False] * 200 + [True] * 500
    assert [run_id for run_id, _ in overlapping[:200]] == [run_id for run_id, _ in first[500:]]
    stored = {r.id: r for r in store.template_runs(template.id, None, 2000)}
    assert sorted(r.plannedAt for r in stored.values() if r.plannedAt is not None) == hours
    assert [stored[run_id].plannedAt for run_id, _ in overlapping] == hours[500:]
    assert {(r.templateId, r.payload["r"]) for r in stored.values()} == {(template.id, 2)}
    assert store.add_runs(template, []) == []


def test_add_runs_of_large_payloads_never_holds_them_all_at_once(store: JobStore) -> None:
    """A backfill of thousands of runs of a template with a payload near the limit: what the call holds in
    memory stays a transaction's worth (MongoDB's driver: a message of at most 48 MB), not runs x payload."""
    payload = {"blob": "x" * 200_000}
    template = store.create(new("large", cron="0 * * * *", payload=payload))
    start = datetime(2030, 1, 1, tzinfo=UTC)
    tracemalloc.start()
    try:
        added = store.add_runs(template, [RunSpec(start + timedelta(hours=h)) for h in range(800)])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [created for _, created in added] == [True] * 800
    assert peak < 64 * 1024 * 1024, f"{peak / 1e6:.0f} MB held for 800 runs of 200 KB (160 MB of payloads)"


def test_concurrent_spawns_of_one_fire_time_insert_one_run(harness: Harness) -> None:
    """Invariant 4: two leaders (or a retry) spawning the same planned time."""
    template = harness.store.create(new("tpl", cron="* * * * *"))
    planned = utc_now()
    stores = [harness.store, harness.open()]
    outcomes = together([partial(stores[i % 2].add_run, template, RunSpec(planned)) for i in range(8)])
    inserted = [o[1] if isinstance(o, tuple) else o for o in outcomes]
    assert sorted(inserted, key=str) == [False] * 7 + [True], outcomes
    runs = [j for j in tenant_jobs(harness.store, "tenant-a", None, 10) if j.templateId == template.id]
    assert len(runs) == 1


def advanced(store: JobStore, template: Job, next_at: datetime) -> bool:
    """The leader's move of a template's fire-time cursor: a compare-and-set on its status and scheduledAt."""
    return store.update_if_unmoved(template, transitions.template_rescheduled(next_at, utc_now())) is not None


def test_a_template_moves_on_only_the_template_it_was_given(store: JobStore) -> None:
    now = utc_now()
    template = store.create(new(cron="* * * * *", scheduledAt=now))
    assert advanced(store, template, now + timedelta(minutes=1)) is True
    assert reload(store, template).scheduledAt == now + timedelta(minutes=1)
    assert advanced(store, template, now + timedelta(minutes=2)) is False  # stale: already advanced
    moved = reload(store, template)
    assert moved.scheduledAt == now + timedelta(minutes=1)
    store.cancel(template.id)
    assert advanced(store, moved, now + timedelta(minutes=2)) is False
    assert reload(store, template).scheduledAt == now + timedelta(minutes=1)


def test_two_leaders_advancing_one_template(harness: Harness) -> None:
    template = harness.store.create(new(cron="* * * * *", scheduledAt=utc_now()))
    target = template.scheduledAt + timedelta(minutes=1)
    stores = [harness.store, harness.open()]
    outcomes = together([partial(advanced, s, template, target) for s in stores])
    assert reload(harness.store, template).scheduledAt == target
    assert sorted(outcomes, key=str) == [False, True], outcomes


def test_dead_letter_template(store: JobStore) -> None:
    template = store.create(new(cron="* * * * *"))
    assert store.dead_letter_template(template, "bad cron") is True
    dead = reload(store, template)
    assert (dead.status, dead.lastError) == (Status.DLQ, "bad cron")
    assert store.dead_letter_template(template, "again") is False
    assert reload(store, template).lastError == "bad cron"
    assert store.due_templates(utc_now() + timedelta(days=1), 10) == []


def test_a_job_keeps_the_trace_context_it_was_created_in_and_a_template_s_runs_keep_the_template_s(
    store: JobStore,
) -> None:
    """shared/tracing: an attempt's span is parented on its job's traceparent, a run's linked to its template's."""
    created_in = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    one_off = store.create(new(jobType="traced", traceparent=created_in))
    assert reload(store, one_off).traceparent == created_in
    assert [c.traceparent for c in store.claim_due_jobs(utc_now(), 10, {"traced"}).claimed()] == [created_in]
    assert reload(store, store.create(new(jobType="traced"))).traceparent is None

    template = store.create(new(interval="1h", traceparent=created_in))
    run, added = store.add_run(template, RunSpec(utc_now()))
    assert added
    assert reload(store, run).traceparent == created_in
