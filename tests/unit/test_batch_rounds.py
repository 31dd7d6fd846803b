"""POST /jobs/batch's order of creation for jobs that name others of the batch (services/api/batch_rounds.py):
parents in earlier rounds than their dependents, whatever the order in the body; jobs no round can create named
with the first key that blocks them; a wide and deep batch ordered in one pass."""

from __future__ import annotations

from datetime import UTC, datetime

from services.api.batch_rounds import batch_rounds
from shared.store.base import NewJob


def job(key: str, *after: str, tenant: str = "t") -> tuple[NewJob, list[str]]:
    return NewJob(idempotencyKey=key, tenantId=tenant, jobType="noop", scheduledAt=datetime.now(UTC)), list(after)


def test_parents_come_rounds_before_their_dependents_whatever_the_order() -> None:
    jobs = dict(enumerate([job("load", "a", "b"), job("a", "extract"), job("b", "extract"), job("extract")]))
    plan = batch_rounds(jobs)
    assert plan.rounds == [[3], [1, 2], [0]]
    assert plan.unplaced == {}


def test_missing_keys_cycles_and_what_waits_on_them_are_unplaced() -> None:
    jobs = dict(
        enumerate(
            [
                job("x", "y"),
                job("y", "x"),
                job("after-cycle", "fine", "x"),
                job("orphan", "nowhere"),
                job("after-orphan", "orphan"),
                job("fine"),
                job("other-tenant", "fine", tenant="u"),  # keys are per tenant
            ]
        )
    )
    plan = batch_rounds(jobs)
    assert plan.rounds == [[5]]
    assert plan.unplaced == {0: "y", 1: "x", 2: "x", 3: "nowhere", 4: "orphan", 6: "fine"}


def test_a_batch_that_names_many_keys_each_is_ordered_in_one_pass() -> None:
    """1,000 jobs, each naming the 99 first and its predecessor: a chain 1,000 deep with 100,000 keys named."""
    first = [job(f"k{n}", *(f"k{m}" for m in range(min(n, 99)))) for n in range(99)]
    rest = [job(f"k{n}", *(f"k{m}" for m in range(99)), f"k{n - 1}") for n in range(99, 1000)]
    plan = batch_rounds(dict(enumerate(first + rest)))
    assert [len(r) for r in plan.rounds] == [1] * 1000
    assert [r[0] for r in plan.rounds] == list(range(1000))
