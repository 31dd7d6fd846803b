"""The Bus in-process, for the embedded single-process mode (`jobsched dev`) and fast tests.

Per-type queues shared by every subscription of that type (like one consumer group: each wake-up goes to
one subscriber). A type's wake-ups are handed out in turns by tenant (Wakeup.lane), first in first out within a
tenant: a job claimed for one tenant does not wait behind the wake-ups already waiting for another's backlog.
Nothing survives the process, and unacknowledged messages are not redelivered: on restart
the embedded mode re-pends every job whose wake-up was in memory (the reaper's job with Kafka).
Dead-letter records are kept in a bounded in-memory log for inspection; lifecycle events go nowhere (nothing in
one process would read them: the store keeps each attempt's record), so an executor does not build them.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import deque
from collections.abc import Iterable, Sequence

from shared.bus.base import DLQ_TOPIC, Delivery, Wakeup, dispatch_topic

log = logging.getLogger("jobsched.bus")
RECORD_LOG_SIZE = 10_000


class TurnQueue:
    """Deliveries handed out in turns by lane, first in first out within a lane.

    Taken and given under the lock itself, not through its Condition's Python wrappers (a claim's wake-ups are put
    and got one delivery at a time, thousands a second): the Condition is waited on only when nothing is there."""

    def __init__(self) -> None:
        self._lanes: dict[str | None, deque[Delivery]] = {}
        self._turns: deque[str | None] = deque()  # lanes with deliveries, in the order of their next turn
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)

    def put(self, lane: str | None, delivery: Delivery) -> None:
        self.put_many([(lane, delivery)])

    def put_many(self, deliveries: Iterable[tuple[str | None, Delivery]]) -> None:
        """Each (lane, delivery) queued in its lane, in order; the waiting pollers woken once."""
        with self._lock:
            added = 0
            for lane, delivery in deliveries:
                waiting = self._lanes.get(lane)
                if waiting is None:
                    waiting = self._lanes[lane] = deque()
                    self._turns.append(lane)
                waiting.append(delivery)
                added += 1
            self._ready.notify(added)

    def waiting(self) -> int:
        with self._lock:
            return sum(len(waiting) for waiting in self._lanes.values())

    def get(self, timeout_s: float) -> Delivery | None:
        with self._lock:
            if not self._turns and not self._ready.wait_for(lambda: self._turns, timeout_s):
                return None
            lane = self._turns.popleft()
            waiting = self._lanes[lane]
            delivery = waiting.popleft()
            if waiting:
                self._turns.append(lane)
            else:
                del self._lanes[lane]
            return delivery


class MemoryBus:
    carries_events = False

    def __init__(self) -> None:
        self._queues: dict[str, TurnQueue] = {}
        self._lock = threading.Lock()
        self._offsets = itertools.count()
        self.dead_letters: deque[dict[str, object]] = deque(maxlen=RECORD_LOG_SIZE)

    def _queue(self, job_type: str) -> TurnQueue:
        found = self._queues.get(job_type)
        if found is not None:  # every publish asks: a queue built only to be thrown away is a Condition
            return found
        with self._lock:
            return self._queues.setdefault(job_type, TurnQueue())

    def ensure_topics(self, job_types: Iterable[str]) -> None:
        for job_type in job_types:
            self._queue(job_type)

    def publish_wakeups(self, wakeups: Sequence[Wakeup]) -> list[Wakeup]:
        by_type: dict[str, list[tuple[str | None, Delivery]]] = {}
        for wakeup in wakeups:
            by_type.setdefault(wakeup.jobType, []).append(
                (wakeup.lane, Delivery(None, dispatch_topic(wakeup.jobType), 0, next(self._offsets), wakeup))
            )
        for job_type, deliveries in by_type.items():  # a claim's wake-ups of a type queued at once
            self._queue(job_type).put_many(deliveries)
        return []

    def subscribe(self, job_type: str) -> MemorySubscription:
        return MemorySubscription(self._queue(job_type))

    def publish_dead_letter(self, record: dict[str, object]) -> None:
        self.dead_letters.append({"topic": DLQ_TOPIC, **record})

    def publish_event(self, event: dict[str, object]) -> None:
        return None

    def close(self) -> None:
        return None


class MemorySubscription:
    def __init__(self, source: TurnQueue) -> None:
        self._source = source
        self._paused = False

    def poll(self, timeout_s: float) -> Delivery | None:
        if self._paused:
            return None
        return self._source.get(timeout_s)

    def ack(self, delivery: Delivery) -> None:
        return None  # nothing to commit: delivery is at most once in memory, the store is the truth

    def set_paused(self, paused: bool) -> None:
        self._paused = paused

    def close(self) -> None:
        return None
