"""The executor's loop: fetch wake-ups while a handler slot is free, run them concurrently, acknowledge each
after its job's state is written, heartbeat running attempts, and on SIGTERM finish what is in flight.
A wake-up claimed ahead of its job's time (CLAIM_LOOKAHEAD) is held, without a slot, until that time.

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
from services.executor.attempt import Deadlines, ReusableThread
from services.executor.worker import Worker
from shared.bus.base import Delivery, Subscription, Wakeup
from shared.model import Job, parse_time, utc_now
from shared.store.base import AttemptResult, JobStore, StoreError

log = logging.getLogger("jobsched.executor")
POLL_S = 0.2
PAUSE_AFTER_S = 10.0
RECORD_BACKLOG_PER_SLOT = 4  # outcomes waiting to be written, per handler slot, before slots are held
DEFAULT_HEARTBEAT = timedelta(seconds=1)
MAX_HOLD_S = 60.0  # a wake-up is claimed at most CLAIM_LOOKAHEAD early; never hold one longer than this


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
        worker: Worker,
        subscription: Subscription,
        store: JobStore,
        *,
        concurrency: int,
        lease: timedelta,
        stop: threading.Event | None = None,
        heartbeat: timedelta = DEFAULT_HEARTBEAT,
        announcer: TypeAnnouncer | None = None,
    ) -> None:
        self._heartbeat_every = heartbeat
        self._announcer = announcer
        self._worker = worker
        self._subscription = subscription
        self._store = store
        self._concurrency = concurrency
        self._lease = lease
        self._slots = threading.Semaphore(concurrency)
        self._record_room = threading.Semaphore(RECORD_BACKLOG_PER_SLOT * concurrency)
        self.stop = stop or threading.Event()
        self._deadlines = Deadlines()

    def run(self) -> None:
        if self._announcer is not None:
            self._announcer.announce()  # before the first delivery: the scheduler claims only announced types
        heartbeat = threading.Thread(target=self._heartbeat, daemon=True, name="heartbeat")
        heartbeat.start()
        # Wake-ups claimed ahead of time: (monotonic due, arrival, ...); arrival breaks ties between partitions.
        held: list[tuple[float, int, Delivery, Wakeup]] = []
        arrivals = itertools.count()
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
                    if paused:
                        self._subscription.poll(0)
                    continue
                saturated_since = None
                if paused:
                    self._subscription.set_paused(False)
                    paused = False
                if held and held[0][0] <= time.monotonic():
                    _, _, due_delivery, due_wakeup = heapq.heappop(held)
                    self._submit(due_delivery, due_wakeup)
                    continue
                wait_s = min(POLL_S, held[0][0] - time.monotonic()) if held else POLL_S
                delivery = self._subscription.poll(max(wait_s, 0.0))
                if delivery is None:
                    self._slots.release()
                    continue
                # Decoded once, here: the hold needs its time and the attempt its ids.
                wakeup = self._worker.decode(delivery)
                if wakeup is None:  # malformed: skipped (logged and counted), nothing to run
                    self._subscription.ack(delivery)
                    self._slots.release()
                    continue
                hold_s = _hold_seconds(wakeup)
                if hold_s > 0:  # not due yet: wait without taking a handler slot
                    heapq.heappush(held, (time.monotonic() + hold_s, next(arrivals), delivery, wakeup))
                    self._slots.release()
                    continue
                self._submit(delivery, wakeup)
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

    def _submit(self, delivery: Delivery, wakeup: Wakeup) -> None:
        """Hand a delivery that holds a handler slot to a thread of its own, which starts the attempt, calls the
        handler itself (a plain one under `Deadlines`) and writes the outcome: one thread hand-over per
        attempt rather than three (to an attempt thread, to a handler thread and back)."""
        try:
            thread = ReusableThread.take()
        except RuntimeError:  # no thread can be started: the job stays queued, the reaper puts it back in line
            log.exception("delivery not run", extra={"action": "delivery_error", "offset": delivery.offset})
            self._subscription.ack(delivery)
            self._slots.release()
            return
        thread.run_call(partial(self._handle, delivery, wakeup, thread))

    def _handle(self, delivery: Delivery, wakeup: Wakeup, thread: ReusableThread) -> None:
        """Start and run on a handler slot; the slot is freed as soon as the handler returns, then this thread
        writes the outcome (concurrent threads' writes are batched together) and acknowledges the delivery.
        At most RECORD_BACKLOG_PER_SLOT outcomes per slot wait to be written: past that, slots are held.
        A handler that overran its deadline has its timeout written by `_expired`, and this thread is
        abandoned (it ends when the call returns)."""
        job, result = None, None
        try:
            job = self._worker.start(delivery, wakeup)
            if job is not None:
                result = self._worker.run_inline(job, self._deadlines, partial(self._expired, delivery, job))
                if result is None:
                    thread.abandon()
                    return
        except Exception:  # a bug of ours must not end the loop; the reaper recovers the job
            log.exception("delivery failed", extra={"action": "delivery_error", "offset": delivery.offset})
        if job is None or result is None:
            self._subscription.ack(delivery)
            self._slots.release()
        else:
            self._record_room.acquire()
            self._slots.release()
            self._record(delivery, job, result)
        thread.give_back()

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
        try:
            self._worker.record(job, result)
        except Exception:  # as in _handle: the reaper closes an attempt whose outcome was never written
            log.exception("recording failed", extra={"action": "delivery_error", "offset": delivery.offset})
        finally:
            self._subscription.ack(delivery)
            self._record_room.release()

    def _heartbeat(self) -> None:
        """Every beat: renew the type's announcement and look for cancelled running jobs. Every third of the
        lease: extend the leases of the running attempts."""
        lease_every = max(self._lease.total_seconds() / 3, 0.5)
        next_lease = time.monotonic() + lease_every
        while not self.stop.wait(min(self._heartbeat_every.total_seconds(), lease_every)):
            if self._announcer is not None:
                self._announcer.announce()
            try:
                self._worker.check_cancellations()
                if time.monotonic() >= next_lease:
                    next_lease = time.monotonic() + lease_every
                    running = self._worker.running()
                    if running:
                        self._store.extend_leases(running, utc_now() + self._lease)
            except StoreError as exc:
                log.warning("heartbeat failed", extra={"action": "heartbeat_failed", "error": str(exc)})
