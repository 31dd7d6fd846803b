from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer
from pymongo.database import Database
from starlette.testclient import TestClient

from services.api.app import create_app
from shared.bus.base import Wakeup
from shared.bus.kafka import KafkaBus
from shared.store.mongo import MongoJobStore


@pytest.fixture
def mongo_store(mongo_uri: str, mongo_db: Database[dict[str, object]]) -> Iterator[MongoJobStore]:
    store = MongoJobStore.connect(mongo_uri, mongo_db.name)
    store.ensure_schema()
    yield store
    store.close()


@pytest.fixture
def api(mongo_store: MongoJobStore) -> Iterator[TestClient]:
    with TestClient(create_app(mongo_store), raise_server_exceptions=False) as client:
        yield client


@pytest.fixture
def kafka_bus(kafka_brokers: str, topic_prefix: str) -> Iterator[KafkaBus]:
    bus = KafkaBus(kafka_brokers, partitions=2, topic_prefix=topic_prefix)
    yield bus
    bus.close()


def read_wakeups(brokers: str, topic: str, expected: int, timeout: float = 30) -> list[Wakeup]:
    """Every wake-up on `topic` from the beginning, once `expected` have arrived (or fail after timeout)."""
    consumer = Consumer(
        {
            "bootstrap.servers": brokers,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    found: list[Wakeup] = []
    deadline = time.monotonic() + timeout
    try:
        while len(found) < expected and time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=0.5):
                if message.error() is None:
                    found.append(Wakeup.decode(message.value()))
    finally:
        consumer.close()
    return found
