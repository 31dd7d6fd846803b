"""Job.evolve and job_from_fields build jobs without the dataclass constructor: they must give the same jobs."""

from __future__ import annotations

from dataclasses import fields

import pytest

from shared.model import Job, Status, job_from_fields, utc_now


def a_job() -> Job:
    now = utc_now()
    return Job(
        id="0" * 24,
        idempotencyKey="k",
        tenantId="t",
        jobType="noop",
        status=Status.PENDING,
        scheduledAt=now,
        createdAt=now,
        updatedAt=now,
    )


def test_missing_fields_take_their_defaults_as_the_constructor_gives_them() -> None:
    job = a_job()
    required = ("id", "idempotencyKey", "tenantId", "jobType", "status", "scheduledAt", "createdAt", "updatedAt")
    first = job_from_fields({name: getattr(job, name) for name in required})
    second = job_from_fields({name: getattr(job, name) for name in required})
    assert first == job
    assert first.payload == {}
    assert first.payload is not second.payload


def test_evolve_changes_only_what_it_is_given() -> None:
    job = a_job()
    moved = job.evolve(status=Status.QUEUED, attempts=2)
    assert moved == Job(
        **{**{f.name: getattr(job, f.name) for f in fields(Job)}, "status": Status.QUEUED, "attempts": 2}
    )
    assert job.status is Status.PENDING
    assert job.attempts == 0


def test_unknown_or_missing_required_fields_are_refused() -> None:
    job = a_job()
    with pytest.raises(TypeError, match="no fields"):
        job.evolve(nonsense=1)
    with pytest.raises(TypeError, match="needs the fields"):
        job_from_fields({"id": job.id})


def test_a_built_job_stays_frozen() -> None:
    job = a_job().evolve(attempts=1)
    with pytest.raises(AttributeError):
        job.attempts = 2  # type: ignore[misc]
