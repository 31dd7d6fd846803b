"""The JobBrowser contract (shared/store/browse.py): pages, counts and the DLQ by error, on every store."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from shared.model import Job, Outcome, Status, format_time, utc_now
from shared.schedules.engine import ScheduleEngine
from shared.store.base import JobStore, RunSpec
from shared.store.browse import CursorError, ErrorGroup, JobBrowser, JobQuery, PageCursor, RecentCounts
from tests.contract.store_kit import new, result, running
from tests.support import backend_beside


@pytest.fixture
def browser(store: JobStore) -> JobBrowser:
    return backend_beside(store).browser


def ended(store: JobStore, outcome: Outcome, error: str | None = None, **fields: Any) -> Job:
    """A job whose one attempt ended with `outcome` (maxAttempts 1: a failure dead-letters it)."""
    job = running(store, maxAttempts=1, **fields)
    finished = store.finish_attempt(job, result(outcome, error))
    assert finished is not None
    return finished


def test_pages_walk_every_job_once_newest_first_in_both_directions(store: JobStore, browser: JobBrowser) -> None:
    at = utc_now()
    # Three share one createdAt: the id breaks the tie, so a page boundary inside them loses none.
    jobs = [store.create(new(createdAt=at - timedelta(seconds=min(n, 3)))) for n in range(7)]
    store.create(new(tenantId="tenant-b"))
    expected = sorted(jobs, key=lambda j: (j.createdAt, j.id), reverse=True)

    pages, cursor = [], None
    while page := browser.page("tenant-a", JobQuery(limit=3, before=cursor)):
        pages.append(page)
        cursor = PageCursor.of(page[-1])
    assert [[j.id for j in p] for p in pages] == [[j.id for j in expected[i : i + 3]] for i in (0, 3, 6)]

    back = browser.page("tenant-a", JobQuery(limit=3, after=PageCursor.of(pages[2][0])))
    assert [j.id for j in back] == [j.id for j in pages[1]]
    assert browser.page("tenant-a", JobQuery(limit=3, after=PageCursor.of(expected[0]))) == []


def test_pages_filter_by_status_and_job_type(store: JobStore, browser: JobBrowser) -> None:
    noop = store.create(new())
    other = store.create(new(jobType="other"))
    done = ended(store, Outcome.SUCCEEDED, jobType="done")
    assert [j.id for j in browser.page("tenant-a", JobQuery(jobType="other"))] == [other.id]
    assert [j.id for j in browser.page("tenant-a", JobQuery(status=Status.PENDING))] == [other.id, noop.id]
    assert [j.id for j in browser.page("tenant-a", JobQuery(status=Status.COMPLETED, jobType="done"))] == [done.id]
    assert [j.id for j in browser.page("tenant-a", JobQuery(status=Status.COMPLETED))] == [done.id]
    assert browser.page("tenant-a", JobQuery(status=Status.COMPLETED, before=PageCursor.of(done))) == []
    assert browser.page("tenant-a", JobQuery(status=Status.PENDING, after=PageCursor.of(noop))) == [other]
    assert browser.page("tenant-a", JobQuery(status=Status.COMPLETED, jobType="noop")) == []
    assert browser.page("tenant-a", JobQuery(limit=0)) == []


def test_pages_of_templates_and_of_a_templates_runs(store: JobStore, browser: JobBrowser) -> None:
    one_off = store.create(new(scheduledAt=utc_now() + timedelta(hours=1)))
    template = store.create(new(cron="0 2 * * *"))
    other = store.create(new(interval="5m"))
    assert store.add_run(template, RunSpec(utc_now()))[1]
    [run] = [j for j in browser.page("tenant-a", JobQuery()) if j.templateId == template.id]
    assert [j.id for j in browser.page("tenant-a", JobQuery(templates=True))] == [other.id, template.id]
    assert [j.id for j in browser.page("tenant-a", JobQuery(templates=False))] == [run.id, one_off.id]
    assert [j.id for j in browser.page("tenant-a", JobQuery(templateId=template.id))] == [run.id]
    assert browser.page("tenant-a", JobQuery(templateId=other.id)) == []


def test_buffered_runs_are_listed_as_runs_waiting_or_cancelled(store: JobStore, browser: JobBrowser) -> None:
    template = store.create(new(interval="5m"))
    waiting, _ = store.add_run(template, RunSpec(template.scheduledAt, status=Status.BUFFERED))
    dropped, _ = store.add_run(template, RunSpec(template.scheduledAt + timedelta(minutes=5), status=Status.BUFFERED))
    assert store.cancel(dropped.id).status is Status.CANCELLED
    one_off = store.create(new())
    newest_first = sorted([waiting, dropped, one_off], key=lambda j: (j.createdAt, j.id), reverse=True)

    assert [j.id for j in browser.page("tenant-a", JobQuery(templates=False))] == [j.id for j in newest_first]
    assert [j.id for j in browser.page("tenant-a", JobQuery(templates=True))] == [template.id]
    assert [j.id for j in browser.page("tenant-a", JobQuery(templates=False, status=Status.BUFFERED))] == [waiting.id]
    assert [j.id for j in browser.page("tenant-a", JobQuery(templates=False, status=Status.CANCELLED))] == [dropped.id]
    assert {j.id for j in browser.page("tenant-a", JobQuery(templateId=template.id))} == {waiting.id, dropped.id}


def test_counts_by_type_and_status_and_the_last_hour(store: JobStore, browser: JobBrowser) -> None:
    start = utc_now() - timedelta(seconds=1)
    later = utc_now() + timedelta(hours=1)  # not due: the claims of the attempts below leave them pending
    store.create(new(scheduledAt=later))
    store.create(new(scheduledAt=later))
    ended(store, Outcome.SUCCEEDED)
    ended(store, Outcome.FAILED, "boom", jobType="flaky")
    retried = running(store, jobType="flaky", maxAttempts=3)
    assert store.finish_attempt(retried, result(Outcome.TIMEOUT, "too slow")) is not None
    store.create(new(tenantId="tenant-b", jobType="flaky"))
    store.create(new(cron="0 2 * * *"))
    store.cancel(store.create(new(interval="1h", jobType="hourly")).id)  # a cancelled template: no schedule
    for tenant in ("tenant-a", "tenant-b"):
        paused = store.create(new(tenantId=tenant, interval="5m", jobType="paused"))
        assert ScheduleEngine(store).pause(paused, "maintenance", utc_now()).paused

    counts = browser.counts(None, start)
    assert counts.byType == {"noop": {"pending": 2, "completed": 1}, "flaky": {"dlq": 1, "pending": 2}}
    assert counts.lastHour == {"noop": RecentCounts(completed=1), "flaky": RecentCounts(failed=2, dlq=1)}
    assert (counts.activeTemplates, counts.pausedTemplates) == (1, 2)

    only_b = browser.counts("tenant-b", start)
    assert only_b.byType == {"flaky": {"pending": 1}}
    assert only_b.lastHour == {}
    assert (only_b.activeTemplates, only_b.pausedTemplates) == (0, 1)
    assert browser.counts(None, utc_now() + timedelta(seconds=1)).lastHour == {}


def test_tenants_in_order(store: JobStore, browser: JobBrowser) -> None:
    for tenant in ("b", "a", "c", "a"):
        store.create(new(tenantId=tenant))
    assert browser.tenants(None, 10) == ["a", "b", "c"]
    assert browser.tenants(None, 2) == ["a", "b"]
    assert browser.tenants("b", 10) == ["b"]
    assert browser.tenants("nobody", 10) == []


def test_dead_letters_grouped_by_error_largest_first(store: JobStore, browser: JobBrowser) -> None:
    late = [ended(store, Outcome.FAILED, "late", jobType=t) for t in ("x", "y", "x")]
    early = ended(store, Outcome.FAILED, "early")
    ended(store, Outcome.FAILED, "other tenant", tenantId="tenant-b")
    ended(store, Outcome.SUCCEEDED)

    assert browser.dlq_groups(None, 10) == [
        ErrorGroup("late", 3, ["x", "y"]),
        ErrorGroup("early", 1, ["noop"]),
        ErrorGroup("other tenant", 1, ["noop"]),
    ]
    assert browser.dlq_groups("tenant-b", 10) == [ErrorGroup("other tenant", 1, ["noop"])]
    assert browser.dlq_groups(None, 1) == [ErrorGroup("late", 3, ["x", "y"])]
    assert {j.id for j in browser.dead_letters(None, "late", 10)} == {j.id for j in late}
    assert len(browser.dead_letters(None, "late", 2)) == 2
    assert [j.id for j in browser.dead_letters("tenant-a", "early", 10)] == [early.id]
    assert browser.dead_letters("tenant-b", "early", 10) == []

    store.redrive(early.id)
    assert browser.dead_letters(None, "early", 10) == []


@pytest.mark.parametrize(
    "text", ["", "abc", "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z_123", "nodate_66f9a1c2e4b0a3d5c8f12a01"]
)
def test_a_malformed_cursor_is_refused(text: str) -> None:
    with pytest.raises(CursorError):
        PageCursor.parse(text)


def test_a_cursor_reads_back_what_it_wrote() -> None:
    cursor = PageCursor(utc_now(), "66f9a1c2e4b0a3d5c8f12a01")
    assert PageCursor.parse(str(cursor)) == cursor
    assert PageCursor.parse(f"{format_time(cursor.createdAt)}_{cursor.id.upper()}") == cursor
