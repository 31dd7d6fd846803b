"""The job-type registry contract (shared/job_types/announcements.py), run on SQLite and on MongoDB."""

from __future__ import annotations

import threading
from datetime import timedelta

from bson import ObjectId

from jobsched.backoff import Backoff
from jobsched.type_defaults import TypeDefaults
from shared.job_types.announcements import JobTypeRegistry
from shared.model import utc_now
from shared.store.base import NewJob
from tests.contract.conftest import Harness
from tests.support import backend_beside

BEAT = timedelta(seconds=3)
LONG_AGO = timedelta(days=7)


def registry(harness: Harness) -> JobTypeRegistry:
    return backend_beside(harness.store).job_types


def test_an_announced_type_is_known_with_its_live_executors_and_defaults(harness: Harness) -> None:
    types = registry(harness)
    now = utc_now()
    defaults = TypeDefaults(timeout_s=2.5, max_attempts=7, backoff=Backoff(base_s=0.5, cap_s=30, jitter=True))
    types.announce("exec-1", {"send-email": defaults}, now, now + BEAT)
    types.announce("exec-2", {"send-email": defaults, "resize": TypeDefaults()}, now, now + BEAT)
    [resize, email] = types.job_types(now, now - LONG_AGO)
    assert (email.name, email.executors, email.lastSeenAt, email.defaults) == ("send-email", 2, now, defaults)
    assert (resize.name, resize.executors, resize.defaults) == ("resize", 1, TypeDefaults())


def test_a_second_store_instance_sees_the_announcement(harness: Harness) -> None:
    now = utc_now()
    registry(harness).announce("exec-1", {"report": TypeDefaults()}, now, now + BEAT)
    assert [t.name for t in backend_beside(harness.open()).job_types.job_types(now, now - LONG_AGO)] == ["report"]


def test_announcing_again_renews_the_same_record(harness: Harness) -> None:
    types = registry(harness)
    first = utc_now() - timedelta(seconds=10)
    types.announce("exec-1", {"report": TypeDefaults(max_attempts=2)}, first, first + BEAT)
    now = utc_now()
    assert types.job_types(now, now - LONG_AGO)[0].executors == 0  # the first announcement ran out
    types.announce("exec-1", {"report": TypeDefaults(max_attempts=5)}, now, now + BEAT)
    [report] = types.job_types(now, now - LONG_AGO)
    assert (report.executors, report.lastSeenAt, report.defaults.max_attempts) == (1, now, 5)


def test_a_withdrawn_executor_is_not_live_but_its_type_stays_known(harness: Harness) -> None:
    types = registry(harness)
    now = utc_now()
    types.announce("exec-1", {"report": TypeDefaults()}, now, now + BEAT)
    types.announce("exec-2", {"report": TypeDefaults()}, now, now + BEAT)
    types.withdraw("exec-1", now)
    [report] = types.job_types(now, now - LONG_AGO)
    assert (report.executors, report.lastSeenAt) == (1, now)


def test_types_not_seen_since_the_cutoff_are_left_out_and_can_be_forgotten(harness: Harness) -> None:
    types = registry(harness)
    now = utc_now()
    old = now - timedelta(days=30)
    types.announce("exec-old", {"retired": TypeDefaults()}, old, old + BEAT)
    types.announce("exec-new", {"current": TypeDefaults()}, now, now + BEAT)
    assert [t.name for t in types.job_types(now, now - LONG_AGO)] == ["current"]
    assert types.forget(now - LONG_AGO) == 1
    assert [t.name for t in types.job_types(now, old - LONG_AGO)] == ["current"]


def test_names_with_separators_stay_apart(harness: Harness) -> None:
    types = registry(harness)
    now = utc_now()
    types.announce("b/c", {"a": TypeDefaults()}, now, now + BEAT)
    types.announce("c", {"a/b": TypeDefaults()}, now, now + BEAT)
    assert [(t.name, t.executors) for t in types.job_types(now, now - LONG_AGO)] == [("a", 1), ("a/b", 1)]


def test_concurrent_heartbeats_of_many_executors_are_all_counted(harness: Harness) -> None:
    stores = [harness.open() for _ in range(4)]
    now = utc_now()
    start = threading.Barrier(len(stores))

    def beat(i: int) -> None:
        types = backend_beside(stores[i]).job_types
        start.wait(30)
        for _ in range(5):
            types.announce(f"exec-{i}", {"shared": TypeDefaults(), f"own-{i}": TypeDefaults()}, now, now + BEAT)

    threads = [threading.Thread(target=beat, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    infos = {t.name: t.executors for t in registry(harness).job_types(now, now - LONG_AGO)}
    assert infos == {"shared": 4, "own-0": 1, "own-1": 1, "own-2": 1, "own-3": 1}


def test_waiting_runs_counts_due_pending_runs_of_one_type(harness: Harness) -> None:
    store = harness.store
    now = utc_now()
    for i, (job_type, due) in enumerate([("fax", True), ("fax", True), ("fax", False), ("noop", True)]):
        at = now - timedelta(minutes=1) if due else now + timedelta(hours=1)
        store.create(NewJob(idempotencyKey=f"k-{i}-{ObjectId()}", tenantId="t", jobType=job_type, scheduledAt=at))
    store.create(NewJob(idempotencyKey="tpl", tenantId="t", jobType="fax", scheduledAt=now, cron="* * * * *"))
    types = registry(harness)
    assert (types.waiting_runs(now, "fax"), types.waiting_runs(now, "noop"), types.waiting_runs(now, "x")) == (2, 1, 0)
