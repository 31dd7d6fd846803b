"""JobStore contract: a start that fails at the store does not spend the attempt.

An executor whose start meets an unavailable or overloaded store retries it. The retry must start the
same attempt at once, not find it taken and leave the job to the reaper, which would close the attempt as
lost: a single-attempt job would then reach the DLQ without its handler ever running."""

from __future__ import annotations

import pytest

from shared.model import Job, Outcome, Status, utc_now
from shared.store.base import AttemptStart, StoreUnavailable
from tests.contract.conftest import Harness
from tests.contract.store_kit import LEASE, hint, queued, reload, result, start
from tests.support import start_one


@pytest.mark.parametrize("hinted", [False, True], ids=["one", "batched"])
def test_the_retry_of_a_failed_start_starts_the_same_attempt(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, hinted: bool
) -> None:
    job = queued(harness.store, maxAttempts=1)

    def start_it() -> Job:
        if not hinted:
            return start(harness.store, reload(harness.store, job))
        return start_one(harness.store, AttemptStart(job.id, job.jobType, "w1", utc_now() + LEASE, hint(job)))

    with harness.failing_next_job_update(monkeypatch), pytest.raises(StoreUnavailable):
        start_it()
    began = start_it()
    assert began.status is Status.RUNNING
    assert began.next_attempt == 1
    finished = harness.store.finish_attempt(began, result(Outcome.SUCCEEDED))
    assert finished is not None
    assert finished.status is Status.COMPLETED
    assert [(e.attempt, e.outcome) for e in harness.store.list_executions(job.id)] == [(1, Outcome.SUCCEEDED)]
