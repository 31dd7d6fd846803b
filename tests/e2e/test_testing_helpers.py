"""`jobsched.testing.embedded`: an application's test runs its own job types through the whole product in its
process, enqueueing typed; only the collections given are served (no demo types), and a test of retries may
replace their backoff so as not to wait for it."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest

import jobsched
from jobsched import HandlerContext, JobTypes, testing
from jobsched.backoff import DEFAULT_BACKOFF

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Invoice:
    customer: str
    cents: int


def test_a_typed_job_runs_through_the_product_in_process() -> None:
    seen: list[tuple[Invoice, str]] = []
    done = threading.Event()
    jobs = JobTypes()

    @jobs.handler("send-invoice", max_attempts=1)
    def send_invoice(invoice: Invoice, ctx: HandlerContext) -> None:
        seen.append((invoice, ctx.tenant_id))
        done.set()

    with testing.embedded(jobs, tenant_id="acme") as client:
        job = client.enqueue(send_invoice, Invoice("ada", 4200), idempotency_key="invoice-1")
        assert job.payload == {"customer": "ada", "cents": 4200}
        assert client.wait(job.id, timeout=30).status == "completed"
        # A payload stored by another caller that does not fit the handler's type fails with the reason.
        odd = client.create("send-invoice", {"customer": "bob", "currency": "EUR"})
        failed = client.wait(odd.id, timeout=30)
        served = {t.name for t in client.job_types()}
    assert seen == [(Invoice("ada", 4200), "acme")]
    assert failed.status == "dlq"
    assert failed.last_error is not None
    assert "PayloadMismatch: the payload does not fit Invoice" in failed.last_error
    assert "'cents' is missing" in failed.last_error  # the unknown "currency" is ignored, the missing field is not
    assert served == {"send-invoice", "http"}  # the demo types are not in a user's product; http is in every one


def test_an_unknown_type_is_refused_by_the_in_process_api() -> None:
    with testing.embedded(JobTypes()) as client, pytest.raises(jobsched.BadRequest, match="flaky"):
        client.create("flaky", {"failRate": 1})


def test_no_backoff_makes_three_attempts_then_the_dlq_a_matter_of_milliseconds() -> None:
    jobs = JobTypes()
    due: list[datetime] = []  # when each attempt was due: a retry's is the end of its backoff

    @jobs.handler("always-fails", max_attempts=3)  # the default backoff: retries 2 s, then 4 s, after a failure
    def always_fails(payload: dict[str, str], ctx: HandlerContext) -> None:
        due.append(ctx.scheduled_at)
        raise ConnectionError("the mail server is down")

    with testing.embedded(jobs, backoff=testing.NO_BACKOFF) as client:
        job = client.create("always-fails", {})
        failed = client.wait(job.id, timeout=30)
        records = client.executions(job.id)

    assert (failed.status, failed.attempts) == ("dlq", 3)
    assert [(r.attempt, r.outcome) for r in records] == [(1, "failed"), (2, "failed"), (3, "failed")]
    # Each retry was due NO_BACKOFF's 1 ms after the attempt before it ended, where the type's own backoff would
    # have made it 2 s and then 4 s.
    ended = [r.finished_at for r in records if r.finished_at is not None]
    assert [later - before for later, before in zip(due[1:], ended, strict=False)] == [
        testing.NO_BACKOFF.delay(1),
        testing.NO_BACKOFF.delay(2),
    ]
    # Only the served copies changed: the application's registration is as it was.
    assert always_fails.defaults.backoff == DEFAULT_BACKOFF
    assert jobs["always-fails"] is always_fails


def test_a_backoff_override_must_be_a_backoff() -> None:
    not_a_backoff: Any = 0.001
    refused = pytest.raises(TypeError, match=r"backoff must be a jobsched\.Backoff \(got 0\.001\)")
    with refused, testing.embedded(JobTypes(), backoff=not_a_backoff):
        pass
