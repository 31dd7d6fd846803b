"""Schedules declared with the code, kept in step with the store by the executors that serve their type
(shared/schedules/declared.py), on SQLite and on MongoDB: executors started at once, a changed declaration, two
versions side by side, a schedule the code dropped, and a name an API-made template holds."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from pymongo.database import Database

import jobsched
from jobsched.schedules import DECLARED_IN_CODE
from services.executor.announcer import TypeAnnouncer
from services.executor.declared_schedules import announcer_with_schedules
from shared.config import ConfigError, Settings
from shared.model import Job, Status, utc_now
from shared.schedules.declared import NOT_DECLARED_NOTE
from shared.schedules.engine import ScheduleEngine
from shared.store.base import JobStore, NewJob
from shared.store.browse import JobQuery
from shared.store.mongo import MongoJobStore
from tests.support import backend_beside

TENANT = "default"


def version(*schedules: jobsched.Schedule, backoff: jobsched.Backoff | None = None) -> jobsched.JobType[Any, Any]:
    """A handler module's job type `digest` declaring `schedules` (one version of the code)."""
    jobs = jobsched.JobTypes()

    @jobs.handler("digest", schedule=schedules, backoff=backoff)
    def digest(payload: dict[str, Any], ctx: jobsched.HandlerContext) -> None:
        return None

    return digest


WEEKLY = jobsched.Schedule("weekly", cron="0 9 * * MON", timezone="Europe/Berlin", payload={"list": "all"})
HOURLY = jobsched.Schedule("hourly", interval="1h", priority=5)
NIGHTLY = jobsched.Schedule("nightly", cron="0 3 * * *", overlap="skip", max_attempts=2)


def executor(store: JobStore, name: str, job_type: jobsched.JobType[Any, Any], **settings: Any) -> TypeAnnouncer:
    return announcer_with_schedules(backend_beside(store), name, job_type, replace(Settings(), **settings))


def templates(store: JobStore) -> dict[str, Job]:
    page = backend_beside(store).browser.page(TENANT, JobQuery(templates=True, limit=100))
    made = {t.idempotencyKey: t for t in page}
    assert len(made) == len(page), f"a schedule made twice: {sorted(t.idempotencyKey for t in page)}"
    return made


def announce_at_once(executors: list[TypeAnnouncer]) -> None:
    start = threading.Barrier(len(executors))

    def run(announcer: TypeAnnouncer) -> None:
        start.wait()
        assert announcer.announce()

    threads = [threading.Thread(target=run, args=(e,)) for e in executors]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_executors_on_a_database_no_api_prepared_make_each_schedule_once(
    mongo_uri: str, mongo_db: Database[dict[str, object]]
) -> None:
    store = MongoJobStore.connect(mongo_uri, mongo_db.name)  # no ensure_schema: a fresh install, no API yet
    try:
        code = version(WEEKLY, HOURLY, NIGHTLY)
        announce_at_once([executor(store, f"exec-{n}", code) for n in range(3)])
        assert "tenant_idempotency_unique" in mongo_db["jobs"].index_information()
        assert sorted(templates(store)) == ["hourly", "nightly", "weekly"]
    finally:
        store.close()


def test_executors_started_at_once_make_each_declared_schedule_once(store: JobStore) -> None:
    code = version(WEEKLY, HOURLY, NIGHTLY)
    executors = [executor(store, f"exec-{n}", code) for n in range(3)]
    announce_at_once(executors)

    made = templates(store)
    assert sorted(made) == ["hourly", "nightly", "weekly"]
    assert {t.declaredBy for t in made.values()} == {DECLARED_IN_CODE}
    assert (made["weekly"].cron, made["weekly"].timezone, made["weekly"].payload) == (
        "0 9 * * MON",
        "Europe/Berlin",
        {"list": "all"},
    )
    assert (made["hourly"].interval, made["hourly"].priority) == ("1h", 5)
    assert (made["nightly"].overlap, made["nightly"].maxAttempts) == ("skip", 2)
    for announcer in executors:  # agreed and applied: the next beats change nothing
        assert announcer.announce()
    assert templates(store) == made


def test_a_changed_declaration_updates_its_template_in_place_keeping_what_it_fired(store: JobStore) -> None:
    old = executor(store, "exec-1", version(jobsched.Schedule("every-minute", interval="1m", payload={"v": 1})))
    assert old.announce()
    template = templates(store)["every-minute"]
    fired_at = template.scheduledAt
    ScheduleEngine(store).fire_due(template, fired_at)
    fired = store.get(template.id)
    assert fired is not None
    assert fired.lastFiredAt == fired_at
    old.withdraw()  # the old version's executor stops: the new one is alone

    new = executor(store, "exec-2", version(jobsched.Schedule("every-minute", interval="2m", payload={"v": 2})))
    assert new.announce()

    updated = templates(store)["every-minute"]
    assert updated.id == template.id
    assert (updated.interval, updated.payload) == ("2m", {"v": 2})
    assert updated.lastFiredAt == fired_at  # what it fired stays fired: no run is made again
    assert updated.declaration != template.declaration
    assert len(store.template_runs(template.id, None, 10)) == 1


def test_a_declared_template_keeps_its_types_backoff_until_its_declaration_changes(store: JobStore) -> None:
    """As its maxAttempts: resolved from the type's defaults when the template is made, and again when a changed
    declaration updates it."""
    slow, faster = jobsched.Backoff(base_s=30, cap_s=600), jobsched.Backoff(base_s=1, cap_s=10)
    versions = [
        version(jobsched.Schedule("every-minute", interval="1m"), backoff=slow),
        version(jobsched.Schedule("every-minute", interval="1m"), backoff=faster),  # the same declaration
        version(jobsched.Schedule("every-minute", interval="2m"), backoff=faster),
        version(jobsched.Schedule("every-minute", interval="3m")),  # the default again
    ]
    kept = []
    for n, code in enumerate(versions):
        running = executor(store, f"exec-{n}", code)
        assert running.announce()
        template = templates(store)["every-minute"]
        kept.append((template.interval, template.backoff))
        running.withdraw()  # the next version's executor is alone
    assert kept == [("1m", slow), ("1m", slow), ("2m", faster), ("3m", None)]


def test_two_versions_side_by_side_change_nothing_until_the_old_one_is_gone(store: JobStore) -> None:
    v1 = version(jobsched.Schedule("report", cron="0 6 * * *"))
    v2 = version(jobsched.Schedule("report", cron="0 7 * * *"))
    old = executor(store, "old", v1)
    assert old.announce()
    assert templates(store)["report"].cron == "0 6 * * *"

    new = executor(store, "new", v2)  # a rolling deploy: both run
    for _ in range(2):
        assert new.announce()
        assert old.announce()  # the old one's beat (or a restart of it) does not flip it back either
    assert templates(store)["report"].cron == "0 6 * * *"
    assert new.schedules is not None
    assert new.schedules.keep(utc_now()) is not None
    assert new.schedules.keep(utc_now()).waiting  # type: ignore[union-attr]

    old.withdraw()  # the deploy ends
    assert new.announce()
    assert templates(store)["report"].cron == "0 7 * * *"
    restarted = executor(store, "old-again", v1)  # an old replica coming back late changes nothing
    assert restarted.announce()
    assert templates(store)["report"].cron == "0 7 * * *"


@pytest.mark.parametrize("when_removed", ["keep", "pause", "cancel"])
def test_a_schedule_the_code_dropped_is_reported_then_paused_or_cancelled(store: JobStore, when_removed: str) -> None:
    first = executor(store, "exec-1", version(WEEKLY, HOURLY))
    assert first.announce()
    first.withdraw()
    second = executor(store, "exec-2", version(WEEKLY), declared_schedules_removed=when_removed)
    assert second.announce()

    dropped = templates(store)["hourly"]
    expected = {
        "keep": (Status.PENDING, False, None),
        "pause": (Status.PENDING, True, NOT_DECLARED_NOTE),
        "cancel": (Status.CANCELLED, False, None),
    }[when_removed]
    assert (dropped.status, bool(dropped.paused), dropped.pauseNote) == expected
    assert templates(store)["weekly"].status is Status.PENDING
    assert second.schedules is not None
    again = second.schedules.reconcile(utc_now())  # what a pass reports while the dropped one still fires
    assert (again.removed, again.unchanged) == (["hourly"] if when_removed != "cancel" else [], ["weekly"])


def test_a_name_held_by_a_template_made_through_the_api_is_left_alone(store: JobStore) -> None:
    made = store.create(
        NewJob(idempotencyKey="weekly", tenantId=TENANT, jobType="digest", scheduledAt=utc_now(), cron="0 8 * * *")
    )
    declared = executor(store, "exec-1", version(WEEKLY))
    assert declared.schedules is not None
    done = declared.schedules.reconcile(utc_now())
    assert done.conflicts == ["weekly"]
    assert templates(store)["weekly"] == made


def test_a_declaration_the_api_would_refuse_stops_the_executor_with_the_reason(store: JobStore) -> None:
    with pytest.raises(ConfigError, match=r"schedule 'broken' of job type 'digest': .*cron"):
        executor(store, "exec-1", version(jobsched.Schedule("broken", cron="61 * * * *")))


def test_a_schedule_whose_bounds_have_passed_has_ended_and_makes_nothing(store: JobStore) -> None:
    over = jobsched.Schedule("campaign", interval="1h", end_at=utc_now() - timedelta(days=1))
    declared = executor(store, "exec-1", version(over))  # no error: an ended schedule is not a broken one
    assert declared.schedules is not None
    done = declared.schedules.reconcile(utc_now())
    assert (done.ended, done.added) == (["campaign"], [])
    assert templates(store) == {}


def test_a_template_is_made_as_of_when_it_is_applied_not_when_the_executor_started(store: JobStore) -> None:
    declared = executor(store, "exec-1", version(jobsched.Schedule("hourly", interval="1h", catchup="all")))
    assert declared.schedules is not None
    later = utc_now() + timedelta(hours=5)  # a deploy that waited for the old version to leave
    declared.schedules.reconcile(later)
    made = templates(store)["hourly"]
    assert made.createdAt == later
    assert made.scheduledAt > later  # no fire time between start-up and now is owed


def test_a_schedule_paused_when_dropped_is_resumed_when_declared_again(store: JobStore) -> None:
    both = executor(store, "exec-1", version(WEEKLY, HOURLY), declared_schedules_removed="pause")
    assert both.announce()
    both.withdraw()
    fewer = executor(store, "exec-2", version(WEEKLY), declared_schedules_removed="pause")
    assert fewer.announce()
    assert templates(store)["hourly"].paused
    fewer.withdraw()
    again = executor(store, "exec-3", version(WEEKLY, HOURLY), declared_schedules_removed="pause")
    assert again.schedules is not None
    done = again.schedules.reconcile(utc_now())
    assert (done.resumed, done.unchanged) == (["hourly"], ["weekly"])  # resumed is not also unchanged
    assert not templates(store)["hourly"].paused
