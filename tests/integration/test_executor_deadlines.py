"""A plain handler runs on its attempt's own thread under `Deadlines`: one that hangs past its deadline has its
timeout written at the deadline, frees its handler slot for the next delivery, and its thread ends once the
call returns, never serving another delivery. Both stores, the in-process bus."""

from __future__ import annotations

import threading

from jobsched import HandlerContext, JobTypes, Payload
from shared.bus.memory import MemoryBus
from shared.model import Outcome, Status
from shared.store.base import JobStore
from tests.executor_support import LEASE, executor_of, running
from tests.integration.test_executor_cancel import dispatch, final


def test_a_hung_plain_handler_times_out_at_its_deadline_and_its_slot_serves_the_next_job(api_store: JobStore) -> None:
    registry = JobTypes()
    release = threading.Event()
    threads: dict[str, threading.Thread] = {}

    @registry.handler("hangs-once")
    def hangs_once(payload: Payload, ctx: HandlerContext) -> None:
        threads[ctx.job_id] = threading.current_thread()
        if payload.get("hang"):
            release.wait(30)

    bus = MemoryBus()
    subscription = bus.subscribe("hangs-once")
    # One handler slot: the second job can only run once the hung call's slot was freed at its deadline.
    executor = executor_of(
        api_store, bus, registry, "hangs-once", subscription, "w-deadlines", timeout=LEASE, concurrency=1
    )
    with running(executor):  # which checks, at its end, that the executor stopped
        try:
            hung = dispatch(api_store, bus, "hangs-once", payload={"hang": True}, timeoutSeconds=0.3)
            quick = dispatch(api_store, bus, "hangs-once", payload={})
            assert final(api_store, quick).status is Status.COMPLETED
            ended = final(api_store, hung)
            assert ended.status is not Status.COMPLETED
            [attempt] = api_store.list_executions(hung.id)[:1]
            assert attempt.outcome is Outcome.TIMEOUT
            assert attempt.error == "timed out after 0.3s"
            assert not release.is_set()  # the timeout was written while the handler still hung
            assert threads[quick.id] is not threads[hung.id]
        finally:
            release.set()
    abandoned = threads[hung.id]
    abandoned.join(10)
    assert not abandoned.is_alive()  # once its call returned, the abandoned thread ended
