"""What a job's body says about its attempts and its lease: `attempts` (the contract's: attempts that ended without
completing the job) and `runs` (attempts started, as /executions lists them) side by side; a lease only while one
holds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobsched.backoff import Backoff
from shared.model import Job, Status

AT = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def job(status: Status, attempts: int = 0, **fields: object) -> Job:
    return Job(
        id="0" * 24,
        idempotencyKey="k",
        tenantId="t",
        jobType="noop",
        status=status,
        scheduledAt=AT,
        createdAt=AT,
        updatedAt=AT,
        attempts=attempts,
        leaseExpiresAt=AT + timedelta(minutes=5),
        claimedBy="executor-1",
        **fields,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("status", "attempts", "runs"),
    [
        (Status.PENDING, 0, 0),  # not run yet
        (Status.PENDING, 2, 2),  # two failed, waiting for its backoff
        (Status.RUNNING, 1, 2),  # the second attempt running
        (Status.COMPLETED, 0, 1),  # succeeded at its first attempt: attempts 0, one run
        (Status.COMPLETED, 2, 3),
        (Status.DLQ, 3, 3),
        (Status.CANCELLED, 0, 0),  # cancelled before it ran
    ],
)
def test_runs_count_the_attempts_started(status: Status, attempts: int, runs: int) -> None:
    wire = job(status, attempts).to_wire()
    assert (wire["attempts"], wire["runs"]) == (attempts, runs)


def test_a_lease_shows_only_while_it_holds() -> None:
    assert "leaseExpiresAt" in job(Status.RUNNING).to_wire()
    for ended in (Status.COMPLETED, Status.DLQ, Status.CANCELLED, Status.PENDING):
        wire = job(ended).to_wire()
        assert "leaseExpiresAt" not in wire
        assert wire["claimedBy"] == "executor-1"  # who ran it last stays


def test_a_template_has_no_runs_of_its_own() -> None:
    assert "runs" not in job(Status.PENDING, cron="0 2 * * *").to_wire()


def test_the_backoff_a_job_keeps_is_not_on_the_wire() -> None:
    kept = job(Status.PENDING, backoff=Backoff(base_s=30, cap_s=600)).to_wire()
    assert kept == job(Status.PENDING).to_wire()
    assert "backoff" not in kept
