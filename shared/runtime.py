"""What every distributed binary does at start-up: connect to the bus (the store: shared/backends.py), and stop
on a signal."""

from __future__ import annotations

import signal
from collections.abc import Callable
from types import FrameType

from shared.bus.kafka import KafkaBus
from shared.config import Settings


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
