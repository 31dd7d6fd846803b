"""What every server binary does at start-up: connect to the store and the bus, and stop on a signal."""

from __future__ import annotations

import signal
from collections.abc import Callable
from types import FrameType

from shared.bus.kafka import KafkaBus
from shared.config import Settings
from shared.store.mongo import MongoJobStore


def connect_store(settings: Settings) -> MongoJobStore:
    timeout_ms = int(settings.mongo_timeout.total_seconds() * 1000)
    return MongoJobStore.connect(settings.mongo_uri, settings.mongo_db, timeout_ms=timeout_ms)


def connect_bus(settings: Settings) -> KafkaBus:
    return KafkaBus(
        settings.kafka_brokers, partitions=settings.kafka_partitions, topic_prefix=settings.kafka_topic_prefix
    )


def on_termination(stop: Callable[[], None]) -> None:
    """Call `stop` on SIGTERM (orchestrators, kill) and SIGINT (Ctrl-C): the graceful path of every binary."""

    def handle(signum: int, frame: FrameType | None) -> None:
        stop()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
