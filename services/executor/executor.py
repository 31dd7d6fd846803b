"""The executor's loop: fetch wake-ups while a handler slot is free, start what it fetched at once (one store
call), run each started attempt on a thread of its own, acknowledge each delivery after its job's state is
written, heartbeat running attempts, and on SIGTERM finish what is in flight.
A wake-up claimed ahead of its job's time (CLAIM_LOOKAHEAD), or whose start its type's start rate refused (the store
says when its turn comes), is held, without a slot, until that time.

Memory stays bounded: at most `concurrency` deliveries are taken at once (the client's prefetch buffer is
bounded by librdkafka's queue settings); when every slot stays busy the subscription is paused.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from datetime import timedelta
from functools import partial

from services.executor.announcer import TypeAnnouncer
from services.executor.attempt_runner import AttemptRunner
from services.executor.handler_calls import Deadlines, HandlerThreads, Task
from services.executor.tokens import Tokens
from shared.bus.base import Delivery, Subscription, Wakeup
from shared.model import Job, parse_time, utc_now
from shared.store.base import AttemptResult, ExecutorStore, RateLimited, StoreError, StoreUnavailable

log = logging.getLogger("jobsched.executor")
POLL_S = 0.2
PAUSE_AFTER_S = 10.0
RECORD_BACKLOG_PER_SLOT = 4  # outcomes waiting to be written, per handler slot, before slots are held
DEFAULT_HEARTBEAT = timedelta(seconds=1)
MAX_HOLD_S = 60.0  # a wake-up is claimed at most CLAIM_LOOKAHEAD early; never hold one longer than this
# A start its type's rate refused is tried again at its turn, or after this at the latest: well within
# QUEUED_TIMEOUT, after which the reaper would put the job back in line and a claim reserve it a second start.
MAX_RATE_HOLD_S = 10.0
MAX_START_BATCH = 256  # deliveries started by one store call, at most


def _hold_seconds(wakeup: Wakeup) -> float:
    """How long until the wake-up's job is due (it was claimed ahead of time), 0 when it is due or unknown."""
    if wakeup.at is None:
        return 0.0
    try:
        return min((parse_time(wakeup.at) - utc_now()).total_seconds(), MAX_HOLD_S)
    except ValueError:
        return 0.0


class Executor:
    def __init__(
        self,
        attempts: AttemptRunner,
        subscription: Subscription,
        store: ExecutorStore,
        *,
        concurrency: int,
        lease: timedelta,
        stop: threading.Event | None = None,
        heartbeat: timedelta = DEFAULT_HEARTBEAT,
        announcer: TypeAnnouncer | None = None,
    ) -> None:
        self._heartbeat_every = heartbeat
        self._announcer = announcer
        self._attempts = attempts
        self._subscription = subscription
        self._store = store
        self._concurrency = concurrency
        self._lease = lease
        self._slots = Tokens(concurrency)
        self._record_room = Tokens(RECORD_BACKLOG_PER_SLOT * concurrency)
        self.stop = stop or threading.Event()
        self._deadlines = Deadlines()
        self._held: list[tuple[float, int, Delivery, Wakeup]] = []  # touched only by the loop's thread
        self._arrivals = itertools.count()

    def run(self) -> None:
        if self._announcer is not None:
            self._announcer.announce()  # before the first delivery: the scheduler claims only announced types
        heartbeat = threading.Thread(target=self._heartbeat, daemon=True, name="heartbeat")
        heartbeat.start()
        # Wake-ups claimed ahead of time, or waiting for their type's start rate: (monotonic due, arrival, ...);
        # arrival breaks ties between partitions.
        held = self._held
        arrivals = self._arrivals
        paused = False
        saturated_since: float | None = None
        try:
            while not self.stop.is_set():
                if not self._slots.acquire(timeout=POLL_S):
                    # Every slot busy. Pausing costs a refetch on resume, so only pause for long saturation;
                    # a paused subscription is still polled, which keeps the group membership alive.
                    saturated_since = saturated_since or time.monotonic()
                    if not paused and time.monotonic() - saturated_since >= PAUSE_AFTER_S:
                        self._subscription.set_paused(True)
                        paused = True
                    # A rebalance can assign partitions the pause has not reached yet, whose messages come back
                    # here: each is kept (held, due at once when not claimed ahead), not lost.
                    if paused and (delivery := self._subscription.poll(0)) is not None:
                        self._keep_for_later(delivery, held, arrivals)
                    continue
                saturated_since = None
                if paused:
                    self._subscription.set_paused(False)
                    paused = False
                wait_s = min(POLL_S, held[0][0] - time.monotonic()) if held else POLL_S
                due = self._take_due(held, arrivals, max(wait_s, 0.0))
                if due is None:
                    self._slots.release()
                    continue
                # What else is there, taken without waiting while slots are free, is started with it: one store
                # call for all, and under load the batch grows with what arrived during the previous one.
                batch = [due]
                while len(batch) < MAX_START_BATCH and self._slots.acquire(blocking=False):
                    due = self._take_due(held, arrivals, 0.0)
                    if due is None:
                        self._slots.release()
                        break
                    batch.append(due)
                self._start(batch)
        finally:
            # Held wake-ups stay unacknowledged: their jobs are still queued, redelivered after a restart.
            log.info(
                "stopping: waiting for in-flight attempts",
                extra={"action": "executor_draining", "held": len(held)},
            )
            if self._announcer is not None:
                self._announcer.withdraw()
            self._wait_for_attempts()
            self._deadlines.close()
            self._subscription.close()
            log.info("stopped", extra={"action": "executor_stopped"})

    def _take_due(
        self, held: list[tuple[float, int, Delivery, Wakeup]], arrivals: itertools.count[int], wait_s: float
    ) -> tuple[Delivery, Wakeup] | None:
        """The next delivery to start now, for a handler slot the caller holds: a held one that has come due,
        else one polled for up to `wait_s`. None when there is none: nothing arrived, or all that arrived was
        malformed (skipped) or is not due yet (held). What arrived is read on, without waiting, until a due one
        or nothing is left: the loop spends most of its time in start calls under load, and must still read
        wake-ups as fast as they come, or the ones claimed ahead would be read after their time."""
        if held and held[0][0] <= time.monotonic():
            _, _, due_delivery, due_wakeup = heapq.heappop(held)
            return due_delivery, due_wakeup
        delivery = self._subscription.poll(wait_s)
        while delivery is not None:
            if (due := self._due_or_held(delivery, held, arrivals)) is not None:
                return due
            delivery = self._subscription.poll(0)
        return None

    def _due_or_held(
        self, delivery: Delivery, held: list[tuple[float, int, Delivery, Wakeup]], arrivals: itertools.count[int]
    ) -> tuple[Delivery, Wakeup] | None:
        """A polled delivery's wake-up when it is due now; None when it was skipped (malformed) or held (claimed
        ahead of its job's time)."""
        # Decoded once, here: the hold needs its time and the attempt its ids.
        wakeup = self._attempts.decode(delivery)
        if wakeup is None:  # malformed: skipped (logged and counted), nothing to run
            self._subscription.ack(delivery)
        elif (hold_s := _hold_seconds(wakeup)) > 0:  # not due yet: wait without taking a handler slot
            heapq.heappush(held, (time.monotonic() + hold_s, next(arrivals), delivery, wakeup))
        else:
            return delivery, wakeup
        return None

    def _keep_for_later(
        self, delivery: Delivery, held: list[tuple[float, int, Delivery, Wakeup]], arrivals: itertools.count[int]
    ) -> None:
        """A delivery polled while no handler slot is free: held, and taken first when one frees if it is due."""
        if (due := self._due_or_held(delivery, held, arrivals)) is not None:
            heapq.heappush(held, (time.monotonic(), next(arrivals), *due))

    def _start(self, batch: list[tuple[Delivery, Wakeup]]) -> None:
        """Start the batch's attempts (each delivery holds a handler slot) in one store call, and hand each
        started one to a handler thread, which calls the handler itself (a plain one under `Deadlines`) and
        writes the outcome: one thread hand-over per attempt. The threads are reserved first, so an attempt is
        started only when a thread will run it; a start the store could not settle is retried on its thread,
        not here."""
        reserved = HandlerThreads.reserve(len(batch))
        for delivery, wakeup in batch[reserved:]:  # no thread: the job stays queued, the reaper puts it back
            log.error("delivery not run: no thread", extra={"action": "delivery_error", "jobId": wakeup.jobId})
            self._skip_delivery(delivery)
        batch = batch[:reserved]
        outcomes: list[Job | StoreUnavailable | RateLimited | None] = [None] * len(batch)
        try:
            outcomes = self._attempts.start_many([wakeup for _, wakeup in batch])
        except Exception:  # a bug of ours must not end the loop; the reaper recovers the jobs
            log.exception("deliveries failed", extra={"action": "delivery_error", "count": len(batch)})
        for (delivery, wakeup), outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, Job):
                HandlerThreads.run_reserved(partial(self._handle, delivery, outcome))
            elif isinstance(outcome, StoreUnavailable):
                HandlerThreads.run_reserved(partial(self._start_retrying, delivery, wakeup))
            elif isinstance(outcome, RateLimited):  # its turn comes at `until`: held till then, its slot freed
                HandlerThreads.unreserve()
                wait_s = min(max(0.0, (outcome.until - utc_now()).total_seconds()), MAX_RATE_HOLD_S)
                heapq.heappush(self._held, (time.monotonic() + wait_s, next(self._arrivals), delivery, wakeup))
                self._slots.release()
            else:
                HandlerThreads.unreserve()
                self._skip_delivery(delivery)

    def _skip_delivery(self, delivery: Delivery) -> None:
        """A delivery that runs nothing (skipped, or left to the reaper): acknowledged, its slot freed."""
        self._subscription.ack(delivery)
        self._slots.release()

    def _start_retrying(self, delivery: Delivery, wakeup: Wakeup, task: Task) -> None:
        job = self._attempts.start_retrying(wakeup)
        if job is None:
            self._skip_delivery(delivery)
        else:
            self._handle(delivery, job, task)

    def _handle(self, delivery: Delivery, job: Job, task: Task) -> None:
        """Run a started attempt on a handler slot; the slot is freed as soon as the handler returns, then its
        outcome joins the next batch of outcomes, and the delivery is acknowledged once that is written.
        At most RECORD_BACKLOG_PER_SLOT outcomes per slot wait to be written: past that, slots are held.
        A handler that overran its deadline has its timeout written by `_expired`, and this thread is
        abandoned (it ends when the call returns)."""
        result = None
        try:
            result = self._attempts.run(job, self._deadlines, partial(self._expired, delivery, job))
            if result is None:
                task.abandon()
                return
        except Exception:  # a bug of ours must not end the loop; the reaper recovers the job
            log.exception("delivery failed", extra={"action": "delivery_error", "offset": delivery.offset})
        if result is None:
            self._skip_delivery(delivery)
        else:
            self._record_room.acquire()
            self._slots.release()
            self._record(delivery, job, result)

    def _expired(self, delivery: Delivery, job: Job, result: AttemptResult) -> None:
        self._record_room.acquire()
        self._slots.release()
        self._record(delivery, job, result)

    def _wait_for_attempts(self) -> None:
        """Until every handler slot is free and every outcome written (a hung handler's slot is freed at its
        deadline)."""
        for _ in range(self._concurrency):
            self._slots.acquire()
        for _ in range(RECORD_BACKLOG_PER_SLOT * self._concurrency):
            self._record_room.acquire()

    def _record(self, delivery: Delivery, job: Job, result: AttemptResult) -> None:
        self._attempts.record_later(job, result, partial(self._recorded, delivery))

    def _recorded(self, delivery: Delivery) -> None:
        try:
            self._subscription.ack(delivery)
        finally:
            self._record_room.release()

    def _heartbeat(self) -> None:
        """Every beat: renew the type's announcement, look for cancelled running jobs and write the progress
        their handlers reported. Every third of the lease: extend the leases of the running attempts."""
        lease_every = max(self._lease.total_seconds() / 3, 0.5)
        next_lease = time.monotonic() + lease_every
        while not self.stop.wait(min(self._heartbeat_every.total_seconds(), lease_every)):
            if self._announcer is not None:
                self._announcer.beat()
            try:
                self._attempts.check_cancellations()
                self._attempts.write_progress()
                if time.monotonic() >= next_lease:
                    next_lease = time.monotonic() + lease_every
                    running = self._attempts.running()
                    if running:
                        self._store.extend_leases(running, utc_now() + self._lease)
            except StoreError as exc:
                log.warning("heartbeat failed", extra={"action": "heartbeat_failed", "error": str(exc)})
