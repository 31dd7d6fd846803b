"""The benchmarks' baseline claim (loadtest/reference.py), on every store: one job at a time, in claim order."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from loadtest.reference import ClaimNext, MongoClaimNext, store_claim_next
from shared.model import Job, Status, utc_now
from tests.contract.conftest import CLAIM_ORDER, Harness, MongoHarness


@pytest.fixture
def claim_next(harness: Harness) -> Iterator[ClaimNext]:
    if isinstance(harness, MongoHarness):
        claim = MongoClaimNext(harness.uri, harness.db.name)
        yield claim
        claim.close()
    else:
        yield store_claim_next(harness.store)


def test_claim_next_takes_one_job_at_a_time_in_claim_order(claim_next: ClaimNext, line: dict[str, Job]) -> None:
    names = {job.id: name for name, job in line.items()}
    claimed: list[str] = []
    while (job := claim_next(utc_now(), {"noop"})) is not None:
        assert job.status is Status.QUEUED
        claimed.append(names[job.id])
    assert claimed == CLAIM_ORDER
