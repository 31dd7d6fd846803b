"""`jobsched.testing.embedded`: an application's test runs its own job types through the whole product in its
process, enqueueing typed; only the collections given are served (no demo types)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

import jobsched
from jobsched import HandlerContext, JobTypes, testing

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
