"""The MongoDB store when a stale whole-document write-back undoes a transition (what a server without atomic
updates, such as the local stand-in, does under races): no job is lost, no attempt's outcome is undone, and a
live attempt is left to its executor (invariants 1 to 3). The write-backs are made by hand, so these run on
both MongoDB paths; what only the compensations of shared/store/mongo_compat keep is marked."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from pymongo.database import Database

from shared.model import Outcome, Status, utc_now
from shared.store.base import AttemptTaken
from tests.contract.conftest import Harness, MongoHarness
from tests.contract.store_kit import (
    LEASE,
    assert_next_start_closes_it_as_lost,
    queued,
    reload,
    result,
    running,
    start,
)

pytestmark = pytest.mark.integration


@pytest.fixture(params=[pytest.param(True, id="mongo"), pytest.param(False, id="mongo-compat")])
def mongo_harness_any(
    request: pytest.FixtureRequest, mongo_uri: str, mongo_db: Database[dict[str, object]]
) -> Iterator[Harness]:
    made = MongoHarness(mongo_uri, mongo_db, production=request.param)
    yield made
    made.close_all()


def test_a_finished_attempt_undone_by_a_write_back_is_healed_from_the_records(mongo_harness_any: Harness) -> None:
    """Seen in the chaos test on the stand-in: the reaper's re-pend (update_many) read the job while it was
    queued and wrote it back after the executor had completed attempt 1, so the job was queued at attempts 0
    again. Every new delivery finds attempt 1 taken; the decided outcome must be re-applied."""
    store = mongo_harness_any.store
    job = running(store)
    assert store.finish_attempt(job, result(Outcome.SUCCEEDED)) is not None
    mongo_harness_any.force_status(job.id, Status.QUEUED)  # the stale write-back
    stale = reload(store, job)
    assert (stale.status, stale.attempts) == (Status.QUEUED, 0)
    with pytest.raises(AttemptTaken):
        start(store, stale, "w2")
    assert reload(store, job).status is Status.COMPLETED
    assert [e.outcome for e in store.list_executions(job.id)] == [Outcome.SUCCEEDED]


def test_a_cancellation_hidden_by_a_write_back_is_restored_by_the_next_start(mongo_harness_any: Harness) -> None:
    """A racing claim's write-back put a cancelled job back to `queued`: the cancel's attempt record still
    refuses the executor, whose start makes the job cancelled again."""
    store = mongo_harness_any.store
    job = queued(store)
    store.cancel(job.id)
    mongo_harness_any.force_status(job.id, Status.QUEUED)
    with pytest.raises(AttemptTaken):
        start(store, job)
    assert reload(store, job).status is Status.CANCELLED


def test_a_start_hidden_by_a_write_back_is_left_alone_while_its_lease_lives(mongo_harness_any: Harness) -> None:
    """An executor started attempt 1, then an overlapping claim's (or a re-pend's) write-back put the job back
    to `queued` (seen in test_two_claimers_never_double_start_a_job on the stand-in). A new delivery finds the
    attempt taken and must not close it while its lease lives: the executor may be running it."""
    store = mongo_harness_any.store
    job = queued(store)
    start(store, job, "w1")
    mongo_harness_any.force_status(job.id, Status.QUEUED)
    with pytest.raises(AttemptTaken):
        start(store, job, "w2")
    assert reload(store, job).status is Status.QUEUED
    assert [(e.outcome, e.worker) for e in store.list_executions(job.id)] == [(Outcome.RUNNING, "w1")]
    # its executor was alive: the result still lands, from the state the write-back left
    done = store.finish_attempt(reload(store, job).evolve(claimedBy="w1"), result(Outcome.SUCCEEDED))
    assert done is not None
    assert reload(store, job).status is Status.COMPLETED


def test_a_start_hidden_by_a_write_back_whose_executor_died_is_closed_as_lost(mongo_harness_any: Harness) -> None:
    """Invariant 1: the same, and the executor died. No reaper sees the attempt (the job reads `queued`); the
    next delivery closes it as lost once its lease has run out, and the job is run again."""
    store = mongo_harness_any.store
    job = queued(store)
    start(store, job, "w1", utc_now() - timedelta(seconds=1))
    mongo_harness_any.force_status(job.id, Status.QUEUED)
    assert_next_start_closes_it_as_lost(store, job)


def test_heartbeats_keep_a_start_hidden_by_a_write_back_alive(mongo_harness: Harness) -> None:
    """Compensation (non_atomic.py): the executor of a hidden start is alive and heartbeating, past the lease
    its start took. Its heartbeats go to the job document, which the write-back made `queued`, so they must
    reach the attempt's record too, or the next delivery would close a running attempt as lost."""
    store = mongo_harness.store
    job = queued(store)
    started = start(store, job, "w1", utc_now() - timedelta(seconds=1))  # the start's lease, since run out
    mongo_harness.force_status(job.id, Status.QUEUED)
    store.extend_leases([started], utc_now() + LEASE)  # the heartbeat of the live executor
    with pytest.raises(AttemptTaken):
        start(store, job, "w2")
    assert reload(store, job).status is Status.QUEUED
    assert [e.outcome for e in store.list_executions(job.id)] == [Outcome.RUNNING]
