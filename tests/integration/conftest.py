from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from pymongo.database import Database
from starlette.testclient import TestClient

from services.api.app import create_app
from shared.bus.base import Wakeup
from shared.bus.kafka import KafkaBus
from shared.store.mongo import MongoJobStore
from tests.support import ServiceProcess


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


def read_messages(brokers: str, topic: str, expected: int, timeout: float = 30) -> list[bytes]:
    """Every message value on `topic` from the beginning, once `expected` have arrived (or after timeout)."""
    consumer = Consumer(
        {
            "bootstrap.servers": brokers,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    found: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(found) < expected and time.monotonic() < deadline:
            found.extend(m.value() or b"" for m in consumer.consume(500, timeout=0.5) if m.error() is None)
    finally:
        consumer.close()
    return found


def read_wakeups(brokers: str, topic: str, expected: int) -> list[Wakeup]:
    return [Wakeup.decode(raw) for raw in read_messages(brokers, topic, expected)]


def read_events(brokers: str, prefix: str, expected: int, topic: str = "jobs.events") -> list[dict[str, Any]]:
    """JSON records on `<prefix><topic>` (lifecycle events by default, or jobs.dlq)."""
    return [json.loads(raw) for raw in read_messages(brokers, prefix + topic, expected)]


@pytest.fixture
def product_env(
    mongo_uri: str,
    mongo_db: Database[dict[str, object]],
    kafka_brokers: str,
    topic_prefix: str,
    etcd_endpoints: str,
    etcd_prefix: str,
) -> dict[str, str]:
    """The environment of a product process isolated to this test's database, topics and election key."""
    return {
        "MONGO_URI": mongo_uri,
        "MONGO_DB": mongo_db.name,
        "KAFKA_BROKERS": kafka_brokers,
        "KAFKA_TOPIC_PREFIX": topic_prefix,
        "KAFKA_PARTITIONS": "2",
        "ETCD_ENDPOINTS": etcd_endpoints,
        "ELECTION_KEY": f"{etcd_prefix}scheduler-leader",
        "SCHEDULER_TICK": "200ms",
    }


Launch = Callable[..., ServiceProcess]


@pytest.fixture
def launch(product_env: dict[str, str], tmp_path: Path) -> Iterator[Launch]:
    """Start product processes (`launch("executor", "--type", "noop", name="x", ENV=...)`); all stopped after."""
    started: list[ServiceProcess] = []

    def start(service: str, *args: str, name: str | None = None, **env: str) -> ServiceProcess:
        process = ServiceProcess(
            service, {**product_env, **env}, tmp_path, name or f"{service}-{len(started)}", args=list(args)
        )
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()
