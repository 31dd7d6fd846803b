"""The executor's loop on a real store: what it does with each wake-up it polls before any handler runs."""

from __future__ import annotations

import threading
from datetime import timedelta

from bson import ObjectId

from services.executor.runner import Executor
from services.executor.worker import Worker
from services.scheduler.dispatcher import Dispatcher
from shared.bus.base import Delivery, dispatch_topic
from shared.bus.memory import MemoryBus
from shared.election.single import SingleNodeElector
from shared.handlers import registry as builtins
from shared.model import Status, utc_now
from shared.store.base import JobStore, NewJob
from tests.support import wait_until

LEASE = timedelta(seconds=30)


def test_a_malformed_wakeup_is_skipped_and_one_claimed_early_starts_no_sooner_than_due(api_store: JobStore) -> None:
    bus = MemoryBus()
    subscription = bus.subscribe("noop")
    due_at = utc_now() + timedelta(seconds=1)
    job = api_store.create(
        NewJob(idempotencyKey=f"k-{ObjectId()}", tenantId="t", jobType="noop", scheduledAt=due_at, payload={})
    )
    # The malformed message comes first: the loop must skip it and go on to the wake-up behind it.
    bus._queue("noop").put(Delivery(value=b"not json", topic=dispatch_topic("noop"), partition=0, offset=-1))
    dispatcher = Dispatcher(api_store, bus, ["noop"], batch=10, lookahead=timedelta(seconds=5))
    term = SingleNodeElector().campaign(threading.Event())
    assert term is not None
    assert dispatcher.tick(term).published == 1  # claimed ahead of its time: the wake-up carries `at`

    worker = Worker(api_store, bus, builtins, "noop", "w-runner", default_timeout=LEASE, lease=LEASE)
    stop = threading.Event()
    executor = Executor(worker, subscription, api_store, concurrency=2, lease=LEASE, stop=stop)
    thread = threading.Thread(target=executor.run)
    thread.start()
    try:
        wait_until(lambda: (found := api_store.get(job.id)) is not None and found.status is Status.COMPLETED, 30, "job")
    finally:
        stop.set()
        thread.join(30)
    [execution] = api_store.list_executions(job.id)
    assert execution.startedAt is not None
    assert execution.startedAt >= due_at.replace(microsecond=due_at.microsecond // 1000 * 1000)
