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
    """Deliveries handed out in turns by lane, first in first out within a lane."""

    def __init__(self) -> None:
        self._lanes: dict[str | None, deque[Delivery]] = {}
        self._turns: deque[str | None] = deque()  # lanes with deliveries, in the order of their next turn
        self._ready = threading.Condition(threading.Lock())

    def put(self, lane: str | None, delivery: Delivery) -> None:
        with self._ready:
            waiting = self._lanes.get(lane)
            if waiting is None:
                waiting = self._lanes[lane] = deque()
                self._turns.append(lane)
            waiting.append(delivery)
            self._ready.notify()

    def waiting(self) -> int:
        with self._ready:
            return sum(len(waiting) for waiting in self._lanes.values())

    def get(self, timeout_s: float) -> Delivery | None:
        with self._ready:
            if not self._ready.wait_for(lambda: self._turns, timeout_s):
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
        for wakeup in wakeups:
            topic = dispatch_topic(wakeup.jobType)
            delivery = Delivery(value=None, topic=topic, partition=0, offset=next(self._offsets), wakeup=wakeup)
            self._queue(wakeup.jobType).put(wakeup.lane, delivery)
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
