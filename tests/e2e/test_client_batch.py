"""create_many / enqueue_many (POST /jobs/batch) through the clients, in process (jobsched.testing.embedded):
any number of jobs sent 1,000 a request, each answered in its place, resent safely by its keys."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

import pytest

from jobsched import AsyncClient, HandlerContext, JobTypes, testing
from shared.model import MAX_PAYLOAD_BYTES

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Reminder:
    user: str


def test_many_jobs_in_requests_of_a_thousand_each_answered_in_its_place() -> None:
    jobs = JobTypes()

    @jobs.handler("remind")
    def remind(reminder: Reminder, ctx: HandlerContext) -> None:
        pass

    keys = [f"remind-{i}" for i in range(2345)]
    with testing.embedded(jobs, tenant_id="acme") as client:
        first = client.create_many("remind", [{"user": f"u{i}"} for i in range(2345)], idempotency_keys=keys)
        assert [r.index for r in first] == list(range(2345))
        assert all(r.created and r.id for r in first)
        again = client.create_many("remind", [{"user": "other"}] * 2345, idempotency_keys=keys)
        assert [r.status for r in again] == [409] * 2345
        assert [r.id for r in again] == [r.id for r in first]  # sent again: the jobs its keys made
        assert all(r.ok for r in again)
        mixed = client.create_many("remind", [{"user": "a"}, {"blob": "x" * MAX_PAYLOAD_BYTES}, {"user": "c"}])
        assert [r.status for r in mixed] == [201, 413, 201]
        assert mixed[1].error is not None
        assert "payload" in mixed[1].error
        assert not mixed[1].ok
        job = client.get(first[1234].id or "")
        assert (job.payload, job.idempotency_key, job.tenant_id) == ({"user": "u1234"}, "remind-1234", "acme")
        with pytest.raises(ValueError, match="one per payload"):
            client.create_many("remind", [{}, {}], idempotency_keys=["only-one"])


def test_enqueue_many_checks_the_payloads_type_and_the_jobs_run() -> None:
    done = threading.Barrier(4)
    jobs = JobTypes()

    @jobs.handler("remind")
    def remind(reminder: Reminder, ctx: HandlerContext) -> None:
        done.wait(timeout=30)

    with testing.embedded(jobs, tenant_id="acme") as client:
        with pytest.raises(TypeError):
            client.enqueue_many(remind, [Reminder("a"), {"user": "b"}])  # type: ignore[misc]
        results = client.enqueue_many(remind, [Reminder(u) for u in ("a", "b", "c")], priority=4)
        assert all(r.created for r in results)
        done.wait(timeout=30)
        for result in results:
            job = client.wait(result.id or "", timeout=30)
            assert (job.status, job.priority) == ("completed", 4)
        base_url = client.base_url

        async def from_async() -> list[int]:
            async with AsyncClient(base_url, tenant_id="acme") as async_client:
                answered = await async_client.enqueue_many(remind, [Reminder("d")], scheduled_at="2099-01-01T00:00:00Z")
                return [r.status for r in answered]

        assert asyncio.run(from_async()) == [201]
