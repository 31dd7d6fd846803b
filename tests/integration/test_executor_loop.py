"""The executor's loop on a real store: what it does with each wake-up it polls before any handler runs."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from functools import partial
from typing import Any, cast

import pytest
from bson import ObjectId

from services.executor import executor as executor_module
from services.executor.executor import Executor
from services.scheduler.dispatcher import Dispatcher
from shared.bus.base import Delivery, Subscription, Wakeup, dispatch_topic
from shared.bus.memory import MemoryBus, MemorySubscription
from shared.election.single import SingleNodeElector
from shared.handlers.builtin import builtin_types
from shared.model import Job, Status, format_time, utc_now
from shared.store.base import AttemptStart, JobStore, NewJob, StoreError, StoreUnavailable
from tests.executor_support import executor_of, running
from tests.support import wait_until

BUILTIN_TYPES = builtin_types(demo=True)  # what the binaries serve by default

LEASE = timedelta(seconds=30)


def test_a_malformed_wakeup_is_skipped_and_one_claimed_early_starts_no_sooner_than_due(api_store: JobStore) -> None:
    bus = MemoryBus()
    subscription = bus.subscribe("noop")
    due_at = utc_now() + timedelta(seconds=1)
    job = api_store.create(
        NewJob(idempotencyKey=f"k-{ObjectId()}", tenantId="t", jobType="noop", scheduledAt=due_at, payload={})
    )
    # The malformed message comes first: the loop must skip it and go on to the wake-up behind it.
    bus._queue("noop").put(None, Delivery(value=b"not json", topic=dispatch_topic("noop"), partition=0, offset=-1))
    dispatcher = Dispatcher(api_store, bus, ["noop"], batch=10, lookahead=timedelta(seconds=5))
    term = SingleNodeElector().campaign(threading.Event())
    assert term is not None
    assert dispatcher.tick(term).published == 1  # claimed ahead of its time: the wake-up carries `at`

    with executor_running(api_store, bus, subscription, concurrency=2):
        wait_until(partial(is_completed, api_store, job.id), 30, "job")
    [execution] = api_store.list_executions(job.id)
    assert execution.startedAt is not None
    assert execution.startedAt >= due_at.replace(microsecond=due_at.microsecond // 1000 * 1000)


class _StartsUnavailableFor:
    """The store, except that start_attempts answers StoreUnavailable for one job until `recovered` is set
    (the database failed for that member of a batch), as a real outage of a moment would."""

    def __init__(self, store: JobStore, job_id: str) -> None:
        self._store = store
        self._job_id = job_id
        self.recovered = threading.Event()
        self.refused = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def start_attempts(self, starts: Sequence[AttemptStart]) -> list[Job | StoreError]:
        if self.recovered.is_set():
            return self._store.start_attempts(starts)
        others = iter(self._store.start_attempts([s for s in starts if s.job_id != self._job_id]))
        self.refused.set()
        return [StoreUnavailable("injected") if s.job_id == self._job_id else next(others) for s in starts]


def test_a_start_the_store_could_not_settle_is_retried_without_holding_up_the_other_deliveries(
    api_store: JobStore,
) -> None:
    bus = MemoryBus()
    subscription = bus.subscribe("noop")
    jobs = [due_now(api_store) for _ in range(2)]
    flaky = _StartsUnavailableFor(api_store, jobs[0].id)
    with executor_running(cast(JobStore, flaky), bus, subscription, concurrency=4):
        dispatcher = Dispatcher(api_store, bus, ["noop"], batch=10, lookahead=timedelta(0))
        term = SingleNodeElector().campaign(threading.Event())
        assert term is not None
        assert dispatcher.tick(term).published == 2
        wait_until(flaky.refused.is_set, 30, "the first job's start refused as unavailable")
        # While the first job's start is being retried, the poll loop goes on: a third job, published now, runs.
        third = due_now(api_store)
        assert dispatcher.tick(term).published == 1
        for other in (jobs[1].id, third.id):
            wait_until(partial(is_completed, api_store, other), 30, "the other jobs run")
        assert reloaded(api_store, jobs[0].id).status is Status.QUEUED  # not started while the store refuses it
        flaky.recovered.set()
        wait_until(partial(is_completed, api_store, jobs[0].id), 30, "the retried start runs")
    assert [e.attempt for e in api_store.list_executions(jobs[0].id)] == [1]


@contextmanager
def executor_running(store: JobStore, bus: MemoryBus, subscription: Subscription, concurrency: int) -> Iterator[None]:
    """An executor of `noop` jobs on its own thread for the block; stopped (and ended) after it."""
    with running(noop_executor(store, bus, subscription, concurrency)):
        yield


def noop_executor(store: JobStore, bus: MemoryBus, subscription: Subscription, concurrency: int) -> Executor:
    return executor_of(
        store, bus, BUILTIN_TYPES, "noop", subscription, "w-runner", timeout=LEASE, lease=LEASE, concurrency=concurrency
    )


def due_now(store: JobStore) -> Job:
    return store.create(
        NewJob(idempotencyKey=f"k-{ObjectId()}", tenantId="t", jobType="noop", scheduledAt=utc_now(), payload={})
    )


def reloaded(store: JobStore, job_id: str) -> Job:
    job = store.get(job_id)
    assert job is not None
    return job


def is_completed(store: JobStore, job_id: str) -> bool:
    return reloaded(store, job_id).status is Status.COMPLETED


def test_one_look_for_a_due_wakeup_reads_every_waiting_one_and_holds_those_not_due(api_store: JobStore) -> None:
    """Under load the loop spends most of its time in start calls: each look must read all that has arrived
    (holding what is not due), or wake-ups claimed ahead would be read only after their time."""
    bus = MemoryBus()
    subscription = bus.subscribe("noop")
    later = format_time(utc_now() + timedelta(minutes=5))
    for n in range(5):
        wakeup = Wakeup(jobId=str(ObjectId()), jobType="noop", priority=0, at=later)
        bus._queue("noop").put(
            None, Delivery(value=wakeup.encode(), topic=dispatch_topic("noop"), partition=0, offset=n)
        )
    due = Wakeup(jobId=str(ObjectId()), jobType="noop", priority=0)
    bus._queue("noop").put(None, Delivery(value=due.encode(), topic=dispatch_topic("noop"), partition=0, offset=5))
    executor = noop_executor(api_store, bus, subscription, concurrency=2)
    held: list[tuple[float, int, Delivery, Wakeup]] = []
    taken = executor._take_due(held, itertools.count(), 0.0)
    assert taken is not None
    assert taken[1].jobId == due.jobId
    assert len(held) == 5
    assert executor._take_due(held, itertools.count(), 0.0) is None  # nothing due: all five still held
    assert len(held) == 5


class _PartitionsAssignedWhilePaused(MemorySubscription):
    """A subscription that still hands out messages while paused, as Kafka does for the partitions a rebalance
    assigns to a consumer whose pause has not reached them yet."""

    def __init__(self, bus: MemoryBus, job_type: str) -> None:
        super().__init__(bus._queue(job_type))
        self.paused = threading.Event()

    def set_paused(self, paused: bool) -> None:
        super().set_paused(paused)
        if paused:
            self.paused.set()

    def poll(self, timeout_s: float) -> Delivery | None:
        return self._source.get(timeout_s)


def test_a_wakeup_polled_while_every_slot_is_busy_and_the_subscription_paused_runs_once_a_slot_frees(
    api_store: JobStore, monkeypatch: pytest.MonkeyPatch
) -> None:

    monkeypatch.setattr(executor_module, "PAUSE_AFTER_S", 0.1)
    bus = MemoryBus()
    subscription = _PartitionsAssignedWhilePaused(bus, "slow")
    dispatcher = Dispatcher(api_store, bus, ["slow"], batch=10, lookahead=timedelta(0))
    term = SingleNodeElector().campaign(threading.Event())
    assert term is not None
    executor = executor_of(
        api_store, bus, BUILTIN_TYPES, "slow", subscription, "w-runner", timeout=LEASE, lease=LEASE, concurrency=1
    )
    with running(executor):
        busy = create_due(api_store, "slow", {"sleepMs": 3000})
        assert dispatcher.tick(term).published == 1
        wait_until(subscription.paused.is_set, 30, "the only slot to stay busy long enough to pause")
        after = create_due(api_store, "slow", {"sleepMs": 0})
        assert dispatcher.tick(term).published == 1
        wait_until(lambda: bus._queue("slow").waiting() == 0, 30, "the paused loop to poll the wake-up")
        assert reloaded(api_store, busy.id).status is Status.RUNNING  # polled while the slot was still busy
        wait_until(partial(is_completed, api_store, after.id), 30, "the wake-up polled while paused to run")


def create_due(store: JobStore, job_type: str, payload: dict[str, Any]) -> Job:
    return store.create(
        NewJob(idempotencyKey=f"k-{ObjectId()}", tenantId="t", jobType=job_type, scheduledAt=utc_now(), payload=payload)
    )
