"""Handlers decide their outcome through the whole product in one process (embedded: scheduler, executors and API
on SQLite): a snooze runs the job again later without spending its budget, a cancel ends it for good, a give-up
dead-letters it at once (raised, or an exception the type's give_up_on / retry_on names), what a handler returns is
the job's result, and what it reports while it runs is the job's progress."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

import pytest

from jobsched import Cancel, GiveUp, HandlerContext, JobTypes, Snooze
from jobsched.outcomes import MAX_RESULT_BYTES
from jobsched.testing import NO_BACKOFF, context, embedded
from tests.support import wait_until

pytestmark = pytest.mark.e2e


@dataclass
class Summary:
    rows: int
    path: str


def handlers() -> JobTypes:
    jobs = JobTypes()

    @jobs.handler("sync-account", max_attempts=1)
    def sync_account(payload: dict[str, str], ctx: HandlerContext) -> dict[str, int]:
        if ctx.attempt == 1:
            raise Snooze(0.3, reason="upstream busy")
        return {"ranAt": ctx.attempt}

    @jobs.handler("close-account", max_attempts=5)
    def close_account(payload: dict[str, str], ctx: HandlerContext) -> None:
        raise Cancel("the account was closed")

    @jobs.handler("charge-card", max_attempts=5)
    def charge_card(payload: dict[str, str], ctx: HandlerContext) -> None:
        raise GiveUp("the card number is malformed")

    @jobs.handler("write-report")
    async def write_report(payload: dict[str, str], ctx: HandlerContext) -> Summary:
        await asyncio.sleep(0)
        return Summary(rows=12, path="reports/2026-12-04.csv")

    @jobs.handler("huge-result")
    def huge_result(payload: dict[str, str], ctx: HandlerContext) -> str:
        return "x" * (MAX_RESULT_BYTES + 1)

    @jobs.handler("odd-result")
    def odd_result(payload: dict[str, str], ctx: HandlerContext) -> object:
        return object()

    return jobs


def test_handlers_snooze_cancel_give_up_and_return_results() -> None:
    with embedded(handlers()) as client:
        names = ("sync-account", "close-account", "charge-card", "write-report", "huge-result", "odd-result")
        made = {name: client.create(name, {}) for name in names}
        done = {name: client.wait(str(job.id), timeout=60) for name, job in made.items()}
        records = {name: client.executions(job.id) for name, job in done.items()}

    # Snoozed once with one attempt in its budget, then ran again and succeeded: the snooze spent nothing.
    synced = done["sync-account"]
    assert (synced.status, synced.result, synced.snoozes) == ("completed", {"ranAt": 2}, 1)
    snoozed, succeeded = records["sync-account"]
    assert (snoozed.outcome, snoozed.error) == ("snoozed", "snoozed for 0.3s: upstream busy")
    assert (succeeded.outcome, succeeded.result) == ("succeeded", {"ranAt": 2})
    assert snoozed.finished_at is not None
    assert succeeded.started_at is not None
    assert (succeeded.started_at - snoozed.finished_at).total_seconds() >= 0.29

    closed = done["close-account"]
    assert (closed.status, closed.last_error) == ("cancelled", "cancelled by the handler: the account was closed")
    assert [r.outcome for r in records["close-account"]] == ["cancelled"]

    charged = done["charge-card"]
    assert (charged.status, charged.attempts, charged.last_error) == ("dlq", 1, "gave up: the card number is malformed")
    [gave_up] = records["charge-card"]
    assert gave_up.outcome == "failed"
    assert gave_up.traceback is not None
    assert "GiveUp" in gave_up.traceback

    report = done["write-report"]
    assert report.result == {"rows": 12, "path": "reports/2026-12-04.csv"}

    # A result a store cannot keep is dropped, with the reason on the record: the attempt's work is done.
    for name, reason in (("huge-result", "more than 16384"), ("odd-result", "not JSON")):
        assert (done[name].status, done[name].result) == ("completed", None)
        [record] = records[name]
        assert record.result is None
        assert record.error is not None
        assert reason in record.error


class InvalidCard(Exception):
    pass


class ExpiredCard(InvalidCard):
    pass


def test_exceptions_a_type_gives_up_on_dead_letter_at_once_and_the_others_are_retried() -> None:
    jobs = JobTypes()
    retries_on = (TimeoutError, ConnectionError)

    @jobs.handler("charge", max_attempts=5, give_up_on=(InvalidCard, ValueError), retry_on=retries_on)
    def charge(payload: dict[str, str], ctx: HandlerContext) -> dict[str, int]:
        if payload["card"] == "expired":
            raise ExpiredCard("the card expired in 2024")
        if payload["card"] == "unknown":
            raise KeyError(payload["card"])  # neither list: with retry_on set, it gives up
        if ctx.attempt < 3:
            raise ConnectionResetError("the gateway hung up")  # in retry_on: retried
        return {"chargedAt": ctx.attempt}

    @jobs.handler("refund", max_attempts=5, give_up_on=ValueError)
    async def refund(payload: dict[str, str], ctx: HandlerContext) -> dict[str, int]:
        await asyncio.sleep(0)
        if payload["amount"] == "negative":
            raise ValueError("a refund is positive")
        if ctx.attempt < 2:
            raise TimeoutError("the gateway did not answer")  # the handler's own, not its deadline: retried
        return {"refundedAt": ctx.attempt}

    # No backoff: the retried jobs run their attempts at once instead of 2 s, 4 s ... apart.
    with embedded(jobs, backoff=NO_BACKOFF) as client:
        made = {
            "expired": client.create("charge", {"card": "expired"}),
            "unknown": client.create("charge", {"card": "unknown"}),
            "flaky": client.create("charge", {"card": "valid"}),
            "negative": client.create("refund", {"amount": "negative"}),
            "slow": client.create("refund", {"amount": "12"}),
        }
        done = {name: client.wait(str(job.id), timeout=60) for name, job in made.items()}
        records = {name: client.executions(job.id) for name, job in done.items()}

    expired = done["expired"]
    reason = "gave up (ExpiredCard is in give_up_on as InvalidCard): ExpiredCard: the card expired in 2024"
    assert (expired.status, expired.attempts, expired.last_error) == ("dlq", 1, reason)
    [gave_up] = records["expired"]
    assert (gave_up.outcome, gave_up.error) == ("failed", reason)
    assert gave_up.traceback is not None
    assert 'raise ExpiredCard("the card expired in 2024")' in gave_up.traceback  # where the handler raised it
    unknown = done["unknown"]
    assert (unknown.status, unknown.attempts) == ("dlq", 1)
    assert unknown.last_error == "gave up (KeyError is not in retry_on): KeyError: 'unknown'"
    negative = done["negative"]
    assert (negative.status, negative.attempts, negative.last_error) == (
        "dlq",
        1,
        "gave up (ValueError is in give_up_on): ValueError: a refund is positive",
    )

    # Retried while attempts were left (a job's `attempts` counts its closed ones: the success is not among them).
    flaky = done["flaky"]
    assert (flaky.status, flaky.attempts, flaky.result) == ("completed", 2, {"chargedAt": 3})
    assert [(r.outcome, r.error) for r in records["flaky"]] == [
        ("failed", "ConnectionResetError: the gateway hung up"),
        ("failed", "ConnectionResetError: the gateway hung up"),
        ("succeeded", None),
    ]
    slow = done["slow"]
    assert (slow.status, slow.attempts, slow.result) == ("completed", 1, {"refundedAt": 2})
    assert [(r.outcome, r.error) for r in records["slow"]] == [
        ("failed", "TimeoutError: the gateway did not answer"),
        ("succeeded", None),
    ]


def test_a_running_handlers_progress_is_shown_with_its_job_while_it_runs() -> None:
    jobs = JobTypes()
    release = threading.Event()

    @jobs.handler("export-pages")
    def export_pages(payload: dict[str, str], ctx: HandlerContext) -> dict[str, int]:
        ctx.report_progress({"done": 1, "of": 2})
        ctx.report_progress(object())  # not JSON: dropped, logged once; the last kept report stands
        ctx.report_progress({"done": 2, "of": 2})
        if not release.wait(60):
            raise TimeoutError("the test never saw the progress")
        return {"pages": 2}

    with embedded(jobs) as client:
        job = client.create("export-pages", {})
        shown = wait_until(lambda: client.get(job.id).progress, 30, "the handler's progress on its job")
        assert client.get(job.id).status == "running"
        release.set()
        done = client.wait(job.id, timeout=60)

    assert (shown.attempt, shown.value) == (1, {"done": 2, "of": 2})
    assert shown.reported_at is not None
    assert done.created_at is not None
    assert done.created_at <= shown.reported_at
    assert (done.status, done.result) == ("completed", {"pages": 2})
    assert done.progress == shown  # the attempt's last written report stays with the finished job


def test_reports_collect_in_a_list_under_the_testing_context() -> None:
    reports: list[object] = []
    ctx = context("export-pages", progress=reports)
    ctx.report_progress({"done": 1})
    ctx.report_progress({"done": 2})
    assert reports == [{"done": 1}, {"done": 2}]
