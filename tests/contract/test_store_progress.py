"""The store contract, on every implementation: a running attempt's progress (HandlerContext.report_progress),
kept on its job while that attempt runs, and only then."""

from __future__ import annotations

from datetime import timedelta

from shared.model import Outcome, Status, format_time, utc_now
from shared.store.base import AttemptStart, JobStore, ProgressReport
from tests.contract.store_kit import LEASE, claim_one, claimed_batch, hint, reload, result, running, start


def test_the_last_report_of_a_running_attempt_is_its_jobs_progress(store: JobStore) -> None:
    job = running(store)
    at = utc_now()
    store.record_progress([ProgressReport(job, {"done": 1, "of": 10}, at - timedelta(seconds=1))])
    store.record_progress([ProgressReport(job, {"done": 7, "of": 10}, at)])
    assert reload(store, job).progress == {"attempt": 1, "value": {"done": 7, "of": 10}, "reportedAt": format_time(at)}


def test_reports_of_many_attempts_are_written_together_each_to_its_own_job(store: JobStore) -> None:
    jobs = [running(store) for _ in range(3)]
    store.record_progress([ProgressReport(j, n, utc_now()) for n, j in enumerate(jobs)])
    assert [reload(store, j).progress["value"] for j in jobs] == [0, 1, 2]


def test_a_report_that_arrives_after_its_attempt_ended_is_dropped(store: JobStore) -> None:
    job = running(store)
    store.record_progress([ProgressReport(job, "half", utc_now())])
    assert store.finish_attempt(job, result(Outcome.SUCCEEDED)) is not None
    store.record_progress([ProgressReport(job, "late", utc_now())])
    done = reload(store, job)
    assert done.status is Status.COMPLETED
    assert done.progress["value"] == "half"  # the attempt's last written report stays with the finished job


def test_the_next_attempts_start_clears_the_last_attempts_progress(store: JobStore) -> None:
    job = running(store)
    store.record_progress([ProgressReport(job, {"page": 3}, utc_now())])
    failed = store.finish_attempt(job, result(Outcome.FAILED, "boom"))
    assert failed is not None
    assert failed.status is Status.PENDING
    assert reload(store, job).progress["attempt"] == 1  # what the failed attempt reached, until the next one
    again = start(store, claim_one(store, failed, now=failed.scheduledAt))
    assert again.next_attempt == 2
    assert again.progress is None
    # A report the first attempt's executor sends late never lands on the second attempt.
    store.record_progress([ProgressReport(job, {"page": 4}, utc_now())])
    assert reload(store, job).progress is None
    store.record_progress([ProgressReport(again, {"page": 1}, utc_now())])
    assert reload(store, job).progress["attempt"] == 2


def test_a_start_from_a_claim_batch_clears_the_progress_too(store: JobStore) -> None:
    jobs = claimed_batch(store, 2, job_type="progress-batch")
    first = [start(store, j) for j in jobs]
    store.record_progress([ProgressReport(j, "first", utc_now()) for j in first])
    for j in first:
        assert store.finish_attempt(j, result(Outcome.FAILED, "boom")) is not None
    due = utc_now() + timedelta(days=1)
    claimed = [j for j in store.claim_due_jobs(due, 10, {"progress-batch"}) if j.id in {x.id for x in jobs}]
    answers = store.start_attempts([AttemptStart(j.id, j.jobType, "w1", due + LEASE, hint=hint(j)) for j in claimed])
    assert sorted(getattr(a, "next_attempt", None) or 0 for a in answers) == [2, 2]
    assert [reload(store, j).progress for j in jobs] == [None, None]
