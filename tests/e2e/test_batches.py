"""Batches through the whole embedded product (`jobsched.testing.embedded`) and the Python client: members added
in several calls, a seal, the onComplete callback run once after the last member, reading every member's result
and the batch's counts; onSuccess cancelled when a member did not complete."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

import pytest

from jobsched import AsyncClient, HandlerContext, JobTypes, callback, testing

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Invoice:
    number: int
    fail: bool = False


@dataclass(frozen=True)
class Close:
    run: str


def test_the_callback_runs_once_after_the_last_member_and_reads_every_result() -> None:
    seen: list[tuple[int, int, str]] = []
    lock = threading.Lock()
    jobs = JobTypes()

    @jobs.handler("invoice", max_attempts=1)
    def invoice(payload: Invoice, ctx: HandlerContext) -> dict[str, int]:
        if payload.fail:
            raise RuntimeError(f"invoice {payload.number} declined")
        return {"cents": payload.number * 100}

    @jobs.handler("close-run", max_attempts=1)
    def close_run(payload: Close, ctx: HandlerContext) -> dict[str, int]:
        progress = ctx.batch()
        paid = sum(m.result["cents"] for m in ctx.batch_results(page=7) if m.status == "completed")
        with lock:
            seen.append((progress.total, paid, progress.status))
        return {"paid": paid}

    with testing.embedded(jobs) as client:
        run = client.batch(
            name="invoices", on_complete=callback(close_run, Close("2026-12")), on_success=callback(invoice, Invoice(0))
        )
        assert run.status == "open"
        client.enqueue_to_batch(run.id, invoice, [Invoice(n) for n in range(1, 21)])
        client.enqueue_to_batch(run.id, invoice, [Invoice(n) for n in range(21, 31)] + [Invoice(99, fail=True)])
        sealed = client.seal_batch(run.id)
        assert sealed.total == 31
        done = client.wait_batch(run.id, timeout=30)
        assert (done.status, done.counts) == ("failed", {"completed": 30, "dlq": 1})
        assert done.on_complete is not None
        assert done.on_success is not None
        closed = client.wait(done.on_complete, timeout=30)
        assert closed.result == {"paid": sum(range(1, 31)) * 100}
        skipped = client.get(done.on_success)
        assert (skipped.status, skipped.last_error) == (
            "cancelled",
            f"batch {run.id}: 1 of 31 members did not complete",
        )
        assert [b.id for b in client.batches()] == [run.id]
        failed = client.batch_members(run.id, status="dlq")
        assert (list(failed.members.values()), failed.next) == (["dlq"], None)
        assert client.get(next(iter(failed.members))).last_error == "RuntimeError: invoice 99 declined"
        first = client.batch_members(run.id, limit=30)
        assert set(first.members.values()) == {"completed"}
        assert first.next is not None
        rest = client.batch_members(run.id, after=first.next)
        assert len(first.members) + len(rest.members) == 31
        base_url = client.base_url

        async def failed_from_async() -> dict[str, str]:
            async with AsyncClient(base_url) as async_client:
                return (await async_client.batch_members(run.id, status="dlq")).members

        assert asyncio.run(failed_from_async()) == failed.members
    assert seen == [(31, sum(range(1, 31)) * 100, "failed")]  # once
