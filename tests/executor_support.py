"""The product's executor in tests, on the path production runs: the real `Executor` (a poll's starts in one store
call, each started attempt on a handler thread, a plain handler under `Deadlines`, outcomes written in batches),
polling the in-process bus's subscription or a `Feed` the test fills and drains."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from jobsched import JobTypes
from services.executor.announcer import TypeAnnouncer
from services.executor.attempt_runner import AttemptRunner
from services.executor.executor import DEFAULT_HEARTBEAT, Executor
from shared.bus.base import Bus, Delivery, Subscription, Wakeup, dispatch_topic
from shared.bus.memory import MemorySubscription, TurnQueue
from shared.model import Job
from shared.store.base import ExecutorStore

LEASE = timedelta(minutes=5)
TIMEOUT = timedelta(seconds=30)  # a handler's, unless its job or its type sets one
WAIT_S = 30.0  # for the executor to acknowledge what it was fed, and to stop


def wakeup_for(job: Job) -> Wakeup:
    """The wake-up the scheduler publishes for a job it claimed (with its claim hint)."""
    return Wakeup(job.id, job.jobType, job.priority, claim=job.claimToken, attempt=job.next_attempt)


class Feed(MemorySubscription):
    """An executor's subscription of its own, filled by the test, which counts what the executor acknowledged. Not
    the type's queue on the bus: two executors can each be handed the same wake-up, as a redelivery does."""

    def __init__(self, job_type: str) -> None:
        super().__init__(TurnQueue())
        self._topic = dispatch_topic(job_type)
        self._offsets = itertools.count()
        self._counts = threading.Condition()
        self._sent = 0
        self._acked = 0

    def drain(self, *messages: Wakeup | bytes | None, timeout_s: float = WAIT_S) -> None:
        """Hand the messages (wake-ups, or what a broker could hand out) to the executor polling this feed, and
        return once it has acknowledged every one: its attempt's outcome written, or the message skipped."""
        with self._counts:
            self._sent += len(messages)
        for message in messages:
            value = message.encode() if isinstance(message, Wakeup) else message
            self._source.put(None, Delivery(value, self._topic, 0, next(self._offsets)))
        with self._counts:
            if not self._counts.wait_for(lambda: self._acked >= self._sent, timeout_s):
                raise AssertionError(f"{self._sent - self._acked} of {self._sent} messages not acknowledged")

    def ack(self, delivery: Delivery) -> None:
        with self._counts:
            self._acked += 1
            self._counts.notify_all()


def executor_of(
    store: ExecutorStore,
    bus: Bus,
    registry: JobTypes,
    job_type: str,
    subscription: Subscription,
    worker_id: str = "w1",
    *,
    timeout: timedelta = TIMEOUT,
    lease: timedelta = LEASE,
    concurrency: int = 4,
    heartbeat: timedelta = DEFAULT_HEARTBEAT,
    announcer: TypeAnnouncer | None = None,
) -> Executor:
    """`job_type`'s executor on `store`, polling `subscription`; its events and dead letters go to `bus`. Built as
    services/executor/wiring.py builds it, from the test's values rather than the settings (and without the
    type's limits)."""
    attempts = AttemptRunner(store, bus, registry, job_type, worker_id, default_timeout=timeout, lease=lease)
    return Executor(
        attempts, subscription, store, concurrency=concurrency, lease=lease, heartbeat=heartbeat, announcer=announcer
    )


@contextmanager
def running(*executors: Executor) -> Iterator[None]:
    """The executors, each on a thread of its own, for the block; then all stopped at once, their attempts in
    flight finished and their threads ended."""
    threads = [threading.Thread(target=executor.run, name="executor") for executor in executors]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        for executor in executors:
            executor.stop.set()
        for thread in threads:
            thread.join(WAIT_S)
    assert not any(thread.is_alive() for thread in threads), "an executor did not stop"
