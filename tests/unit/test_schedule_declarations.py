"""jobsched.Schedule as a handler module declares it: what is refused at import, and the digests the executors
compare."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

import jobsched
from jobsched.schedules import digest, digest_of_all


@dataclass
class Digest:
    audience: str


def test_a_schedule_needs_a_name_and_one_of_cron_and_interval() -> None:
    with pytest.raises(ValueError, match="give cron or interval"):
        jobsched.Schedule("both", cron="0 9 * * *", interval="1h")
    with pytest.raises(ValueError, match="give cron or interval"):
        jobsched.Schedule("neither")
    with pytest.raises(ValueError, match="needs a name"):
        jobsched.Schedule(" ", cron="0 9 * * *")
    with pytest.raises(ValueError, match="timezone applies only to cron"):
        jobsched.Schedule("hourly", interval="1h", timezone="Europe/Berlin")


def test_a_name_declared_twice_for_a_type_is_refused_at_import() -> None:
    jobs = jobsched.JobTypes()
    twice = [jobsched.Schedule("daily", cron="0 9 * * *"), jobsched.Schedule("daily", interval="1d")]
    with pytest.raises(ValueError, match="declares a schedule name twice"):
        jobs.handler("report", schedule=twice)


def test_the_declared_body_is_the_templates_with_the_payload_encoded_by_the_handlers_type() -> None:
    jobs = jobsched.JobTypes()
    start = datetime(2027, 1, 1, tzinfo=UTC)
    schedule = jobsched.Schedule(
        "weekly", cron="0 9 * * MON", timezone="Europe/Berlin", payload=Digest("all"), start_at=start, timeout=30
    )

    @jobs.handler("digest", schedule=schedule)
    def send(payload: Digest, ctx: jobsched.HandlerContext) -> None:
        return None

    [body] = send.declared("default")
    assert body == {
        "idempotencyKey": "weekly",
        "tenantId": "default",
        "jobType": "digest",
        "cron": "0 9 * * MON",
        "timezone": "Europe/Berlin",
        "payload": {"audience": "all"},
        "timeoutSeconds": 30,
        "startAt": "2027-01-01T00:00:00+00:00",
    }


def test_digests_change_with_a_declaration_and_not_with_its_order() -> None:
    first: dict[str, Any] = {"idempotencyKey": "a", "cron": "0 9 * * *", "payload": {"x": 1, "y": 2}}
    same = {"payload": {"y": 2, "x": 1}, "cron": "0 9 * * *", "idempotencyKey": "a"}
    other = {**first, "cron": "0 10 * * *"}
    assert digest(first) == digest(same) != digest(other)
    assert digest_of_all([first, other]) == digest_of_all([other, same]) != digest_of_all([first])
    assert digest_of_all([]) != digest_of_all([first])
