"""The Bus in-process, for the embedded single-process mode (`jobsched dev`) and fast tests.

Per-type queues shared by every subscription of that type (like one consumer group: each wake-up goes to
one subscriber). Nothing survives the process, and unacknowledged messages are not redelivered: on restart
the embedded mode re-pends every job whose wake-up was in memory (the reaper's job with Kafka).
Events and dead-letter records are kept in bounded in-memory logs for inspection.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from collections import deque
from collections.abc import Iterable, Sequence

from shared.bus.base import DLQ_TOPIC, EVENTS_TOPIC, Delivery, Wakeup, dispatch_topic

log = logging.getLogger("jobsched.bus")
RECORD_LOG_SIZE = 10_000


class MemoryBus:
    def __init__(self) -> None:
        self._queues: dict[str, queue.Queue[Delivery]] = {}
        self._lock = threading.Lock()
        self._offsets = itertools.count()
        self.dead_letters: deque[dict[str, object]] = deque(maxlen=RECORD_LOG_SIZE)
        self.events: deque[dict[str, object]] = deque(maxlen=RECORD_LOG_SIZE)

    def _queue(self, job_type: str) -> queue.Queue[Delivery]:
        found = self._queues.get(job_type)
        if found is not None:  # every publish asks: a Queue built only to be thrown away is three Conditions
            return found
        with self._lock:
            return self._queues.setdefault(job_type, queue.Queue())

    def ensure_topics(self, job_types: Iterable[str]) -> None:
        for job_type in job_types:
            self._queue(job_type)

    def publish_wakeups(self, wakeups: Sequence[Wakeup]) -> list[Wakeup]:
        for wakeup in wakeups:
            delivery = Delivery(
                value=wakeup.encode(), topic=dispatch_topic(wakeup.jobType), partition=0, offset=next(self._offsets)
            )
            self._queue(wakeup.jobType).put(delivery)
        return []

    def subscribe(self, job_type: str) -> MemorySubscription:
        return MemorySubscription(self._queue(job_type))

    def publish_dead_letter(self, record: dict[str, object]) -> None:
        self.dead_letters.append({"topic": DLQ_TOPIC, **record})

    def publish_event(self, event: dict[str, object]) -> None:
        self.events.append({"topic": EVENTS_TOPIC, **event})

    def close(self) -> None:
        return None


class MemorySubscription:
    def __init__(self, source: queue.Queue[Delivery]) -> None:
        self._source = source
        self._paused = False

    def poll(self, timeout_s: float) -> Delivery | None:
        if self._paused:
            return None
        try:
            return self._source.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def ack(self, delivery: Delivery) -> None:
        return None  # nothing to commit: delivery is at most once in memory, the store is the truth

    def set_paused(self, paused: bool) -> None:
        self._paused = paused

    def close(self) -> None:
        return None
