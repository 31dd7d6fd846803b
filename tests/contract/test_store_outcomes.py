"""The store contract, on every implementation: the outcomes a handler decides (jobsched.Snooze, Cancel, GiveUp)
and the result it returns, kept on the attempt's record and the job."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from shared.model import Outcome, Status, utc_now
from shared.store.base import AttemptFinish, JobStore
from tests.contract.store_kit import claim_one, reload, result, running, start

RESULT = {"rows": 12, "file": "s3://reports/2026-12-04.csv", "nested": {"ok": True, "ratio": 0.5, "none": None}}


def test_a_success_keeps_its_result_on_the_record_and_the_job(store: JobStore) -> None:
    job = running(store)
    done = store.finish_attempt(job, replace(result(Outcome.SUCCEEDED), result=RESULT))
    assert done is not None
    assert done.status is Status.COMPLETED
    assert done.result == RESULT
    assert reload(store, job).result == RESULT
    [record] = store.list_executions(job.id)
    assert (record.outcome, record.result) == (Outcome.SUCCEEDED, RESULT)


def test_successes_of_one_batch_keep_each_its_own_result(store: JobStore) -> None:
    jobs = [running(store) for _ in range(4)]
    finishes = [
        AttemptFinish(j, replace(result(Outcome.SUCCEEDED), result={"n": n} if n % 2 else None))
        for n, j in enumerate(jobs)
    ]
    answers = store.finish_attempts(finishes)
    assert [getattr(a, "status", None) for a in answers] == [Status.COMPLETED] * 4
    assert [reload(store, j).result for j in jobs] == [None, {"n": 1}, None, {"n": 3}]
    assert [store.list_executions(j.id)[0].result for j in jobs] == [None, {"n": 1}, None, {"n": 3}]


def test_a_snooze_is_due_again_after_its_delay_without_spending_the_budget(store: JobStore) -> None:
    job = running(store, maxAttempts=1)
    before = utc_now()
    snoozed = store.finish_attempt(
        job, replace(result(Outcome.SNOOZED, "snoozed for 30s: upstream busy"), snooze=timedelta(seconds=30))
    )
    assert snoozed is not None
    assert snoozed.status is Status.PENDING
    assert (snoozed.attempts, snoozed.attemptBase, snoozed.snoozes) == (1, 1, 1)
    assert snoozed.lastError is None  # a snooze is not a failure
    assert before + timedelta(seconds=29) <= snoozed.scheduledAt <= utc_now() + timedelta(seconds=31)
    [record] = store.list_executions(job.id)
    assert (record.outcome, record.error) == (Outcome.SNOOZED, "snoozed for 30s: upstream busy")
    # Its one attempt is still there to spend: it runs again as attempt 2, and a failure then is its last.
    again = start(store, claim_one(store, snoozed, now=snoozed.scheduledAt))
    assert again.next_attempt == 2
    failed = store.finish_attempt(again, result(Outcome.FAILED, "boom"))
    assert failed is not None
    assert (failed.status, failed.attempts, failed.snoozes) == (Status.DLQ, 2, 1)


def test_a_handler_that_gives_up_goes_to_the_dlq_with_attempts_left(store: JobStore) -> None:
    job = running(store, maxAttempts=5)
    gave_up = store.finish_attempt(job, replace(result(Outcome.FAILED, "gave up: malformed account id"), final=True))
    assert gave_up is not None
    assert (gave_up.status, gave_up.attempts, gave_up.lastError) == (Status.DLQ, 1, "gave up: malformed account id")
    [record] = store.list_executions(job.id)
    assert (record.outcome, record.error) == (Outcome.FAILED, "gave up: malformed account id")


def test_a_handler_that_cancels_ends_the_job_cancelled_with_its_reason(store: JobStore) -> None:
    job = running(store, maxAttempts=5)
    reason = "cancelled by the handler: the account was closed"
    cancelled = store.finish_attempt(job, result(Outcome.CANCELLED, reason))
    assert cancelled is not None
    assert (cancelled.status, cancelled.lastError) == (Status.CANCELLED, reason)
    assert store.list_executions(job.id)[0].outcome is Outcome.CANCELLED


def test_a_failure_may_keep_a_result_too_and_a_retry_does_not_lose_the_record(store: JobStore) -> None:
    job = running(store, maxAttempts=3)
    summary = {"status": 503, "body": "try later"}
    failed = store.finish_attempt(job, replace(result(Outcome.FAILED, "HTTP 503"), result=summary))
    assert failed is not None
    assert (failed.status, failed.result) == (Status.PENDING, summary)
    assert store.list_executions(job.id)[0].result == summary
