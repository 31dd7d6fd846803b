"""Smoke test against a real Apache Kafka 4.x broker (deployments/local/kafka.sh) with confluent-kafka.

It checks what the dispatcher relies on: a produced message is acknowledged (delivery report),
consumed, and committed synchronously by hand; a message read but not committed is delivered again to the
next consumer of the same group, and once committed it is not delivered again.

Fixtures from tests/conftest.py: ``kafka_brokers`` ("host:port", session) and ``topic_prefix`` (unique per
test, e.g. "t-ab12cd34ef-"). Every client call has a deadline, so with the broker down the test fails in
about ``METADATA_TIMEOUT_S`` seconds instead of hanging.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

# NewTopic is public in confluent_kafka.admin but not re-exported in its stubs (confluent-kafka ships types).
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

pytestmark = pytest.mark.timeout(120)

METADATA_TIMEOUT_S = 5.0  # a metadata request to a live local broker takes milliseconds
ADMIN_TIMEOUT_S = 10.0  # create / delete topic
DELIVERY_TIMEOUT_MS = 10_000  # librdkafka fails an unacknowledged message after this
RECEIVE_TIMEOUT_S = 20.0  # group join (JoinGroup + SyncGroup + OffsetFetch) and first fetch
ABSENCE_WINDOW_S = 2.0  # how long an assigned consumer must stay silent to count as "nothing new"
POLL_S = 0.1


def client_config(brokers: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": brokers,
        "client.id": "jobsched-smoke",
        "socket.connection.setup.timeout.ms": 5_000,
        "reconnect.backoff.max.ms": 1_000,
    }


def consumer_config(brokers: str, group: str) -> dict[str, Any]:
    return {
        **client_config(brokers),
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6_000,  # the broker's group.min.session.timeout.ms
    }


@pytest.fixture
def admin(kafka_brokers: str) -> AdminClient:
    client = AdminClient(client_config(kafka_brokers))
    try:
        client.list_topics(timeout=METADATA_TIMEOUT_S)
    except KafkaException as exc:
        pytest.fail(f"Kafka at {kafka_brokers} did not answer a metadata request in {METADATA_TIMEOUT_S}s: {exc}")
    return client


@pytest.fixture
def topic(admin: AdminClient, topic_prefix: str) -> Iterator[str]:
    name = f"{topic_prefix}smoke"
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=1, replication_factor=1)],
        operation_timeout=ADMIN_TIMEOUT_S,
        request_timeout=ADMIN_TIMEOUT_S,
    )
    futures[name].result(timeout=ADMIN_TIMEOUT_S + 5)
    # No wait for the topic's metadata: each test first produces, and the delivery report proves the partition
    # leader has it before any consumer subscribes.
    yield name
    # Best effort: a broker that died during the test must not turn a failure into a hang.
    with contextlib.suppress(KafkaException, TimeoutError):
        admin.delete_topics([name], operation_timeout=ADMIN_TIMEOUT_S)[name].result(timeout=ADMIN_TIMEOUT_S + 5)


def offset_of(msg: Message) -> int:
    offset = msg.offset()
    assert offset is not None, f"message without offset: {msg.error()}"
    assert offset >= 0, f"message without offset: {msg.error()}"
    return offset


def partition_of(msg: Message) -> int:
    partition = msg.partition()
    assert partition is not None, f"message without partition: {msg.error()}"
    return partition


def produce_and_wait(brokers: str, topic: str, key: bytes, value: bytes) -> Message:
    """Produce one message and return it as acknowledged by the broker (its delivery report)."""
    producer = Producer(
        {**client_config(brokers), "acks": "all", "enable.idempotence": True, "message.timeout.ms": DELIVERY_TIMEOUT_MS}
    )
    reports: list[tuple[KafkaError | None, Message]] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        reports.append((err, msg))

    producer.produce(topic, value=value, key=key, on_delivery=on_delivery)
    # flush() serves the delivery callback; the message times out (with an error report) before this does.
    remaining = producer.flush(DELIVERY_TIMEOUT_MS / 1000 + 5)
    assert remaining == 0, f"{remaining} message(s) still queued: no delivery report"
    assert len(reports) == 1, reports
    err, delivered = reports[0]
    assert err is None, f"delivery to {topic} failed: {err}"
    offset_of(delivered)
    return delivered


@contextlib.contextmanager
def open_consumer(
    brokers: str, group: str, topic: str, assigned: list[TopicPartition] | None = None
) -> Iterator[Consumer]:
    """A subscribed consumer that is always closed; ``assigned`` collects its partition assignments."""

    def on_assign(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if assigned is not None:
            assigned.extend(partitions)

    consumer = Consumer(consumer_config(brokers, group))
    try:
        consumer.subscribe([topic], on_assign=on_assign)
        yield consumer
    finally:
        consumer.close()  # enable.auto.commit=False: closing commits nothing


def poll_one(consumer: Consumer, timeout_s: float) -> Message:
    """The next message, or a test failure after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        msg = consumer.poll(POLL_S)
        if msg is None:
            continue
        error = msg.error()
        if error is not None:
            raise KafkaException(error)
        return msg
    pytest.fail(f"no message within {timeout_s}s")


def commit_sync(consumer: Consumer, msg: Message) -> None:
    """Commit ``msg`` synchronously and check the broker accepted it for its partition."""
    result = consumer.commit(message=msg, asynchronous=False)
    assert [(tp.topic, tp.partition) for tp in result] == [(msg.topic(), msg.partition())]
    for tp in result:
        assert tp.error is None, f"commit of {tp} failed: {tp.error}"
        assert tp.offset == offset_of(msg) + 1  # the committed offset is the next one to read


def test_produce_consume_manual_commit(kafka_brokers: str, topic: str, topic_prefix: str) -> None:
    key, value = b"job-1", uuid.uuid4().bytes
    delivered = produce_and_wait(kafka_brokers, topic, key, value)

    with open_consumer(kafka_brokers, f"{topic_prefix}g", topic) as consumer:
        msg = poll_one(consumer, RECEIVE_TIMEOUT_S)
        assert (msg.topic(), msg.partition(), msg.offset()) == (topic, delivered.partition(), delivered.offset())
        assert (msg.key(), msg.value()) == (key, value)

        commit_sync(consumer, msg)
        [stored] = consumer.committed([TopicPartition(topic, partition_of(msg))], timeout=METADATA_TIMEOUT_S)
        assert stored.error is None
        assert stored.offset == offset_of(msg) + 1


def test_uncommitted_message_is_redelivered_to_the_group(kafka_brokers: str, topic: str, topic_prefix: str) -> None:
    group = f"{topic_prefix}g"
    value = uuid.uuid4().bytes
    delivered = produce_and_wait(kafka_brokers, topic, b"job-1", value)

    # A reads the message and closes without committing ...
    with open_consumer(kafka_brokers, group, topic) as consumer_a:
        first = poll_one(consumer_a, RECEIVE_TIMEOUT_S)
        assert (first.offset(), first.value()) == (delivered.offset(), value)

    # ... so B, in the same group, gets the same message again, and commits it.
    with open_consumer(kafka_brokers, group, topic) as consumer_b:
        again = poll_one(consumer_b, RECEIVE_TIMEOUT_S)
        assert (again.partition(), again.offset(), again.value()) == (first.partition(), first.offset(), value)
        commit_sync(consumer_b, again)

    # C, in the same group, starts at the committed offset: nothing new while it is assigned and fetching,
    # and the first message it does get is the one produced after the commit.
    assigned: list[TopicPartition] = []
    with open_consumer(kafka_brokers, group, topic, assigned) as consumer_c:
        join_deadline = time.monotonic() + RECEIVE_TIMEOUT_S
        while not assigned:
            unexpected = consumer_c.poll(POLL_S)
            assert unexpected is None, f"got a message after the commit: {unexpected.offset()} {unexpected.error()}"
            if time.monotonic() >= join_deadline:
                pytest.fail(f"consumer C got no assignment within {RECEIVE_TIMEOUT_S}s")
        absence_deadline = time.monotonic() + ABSENCE_WINDOW_S
        while time.monotonic() < absence_deadline:
            unexpected = consumer_c.poll(POLL_S)
            assert unexpected is None, f"got a message after the commit: {unexpected.offset()} {unexpected.error()}"

        marker = produce_and_wait(kafka_brokers, topic, b"job-2", b"after-commit")
        after = poll_one(consumer_c, RECEIVE_TIMEOUT_S)
        assert (after.offset(), after.value()) == (marker.offset(), b"after-commit")
        assert offset_of(after) == offset_of(delivered) + 1
