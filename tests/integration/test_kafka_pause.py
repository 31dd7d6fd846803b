"""A paused executor subscription on a real Kafka broker: a partition taken away while the subscription was
paused, and given back after it resumed, is consumed again.

librdkafka keeps a partition's pause across a rebalance. The executor pauses its subscription while every
handler slot stays busy (a store outage holds them); a broker restart in that window made the group lose the
partitions, the resume found none assigned, and the partitions came back still paused: the executor consumed
nothing again, and its jobs went round between queued and pending (the reaper) for good."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Producer

# NewTopic is public in confluent_kafka.admin but not re-exported in its stubs (confluent-kafka ships types).
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from shared.bus.base import Delivery
from shared.bus.kafka import KafkaSubscription

pytestmark = pytest.mark.timeout(180)

WAIT_S = 60.0  # a group join, a cooperative rebalance and a first fetch on a local broker take seconds


@pytest.fixture
def topic(kafka_brokers: str, topic_prefix: str) -> str:
    name = f"{topic_prefix}pause"
    admin = AdminClient({"bootstrap.servers": kafka_brokers})
    admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)])[name].result(timeout=30)
    return name


@contextlib.contextmanager
def subscription(brokers: str, topic: str, group: str) -> Iterator[KafkaSubscription]:
    made = KafkaSubscription(brokers, topic, group)
    try:
        yield made
    finally:
        made.close()


def assigned(sub: KafkaSubscription) -> set[int]:
    return {p.partition for p in sub._consumer.assignment()}  # what the group gave this member


def poll_until(subs: list[KafkaSubscription], done: Callable[[list[Delivery]], bool], what: str) -> list[Delivery]:
    """Poll every subscription (a member that is not polled drops out of the group) until `done(received)`."""
    received: list[Delivery] = []
    deadline = time.monotonic() + WAIT_S
    while not done(received):
        assert time.monotonic() < deadline, f"timed out after {WAIT_S}s waiting for {what}"
        for sub in subs:
            if (delivery := sub.poll(0.05)) is not None:
                received.append(delivery)
    return received


def produce(brokers: str, topic: str, partition: int, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": brokers, "acks": "all"})
    producer.produce(topic, value=value, partition=partition)
    assert producer.flush(30) == 0


def test_a_partition_lost_while_paused_is_consumed_once_it_comes_back(kafka_brokers: str, topic: str) -> None:
    group = f"{topic}-executors"
    with subscription(kafka_brokers, topic, group) as first:
        poll_until([first], lambda _: assigned(first) == {0, 1}, "the first member to have both partitions")
        first.set_paused(True)  # every handler slot busy
        with subscription(kafka_brokers, topic, group) as second:
            # A rebalance takes one partition away from the paused member (a broker restart took them all).
            poll_until(
                [first, second], lambda _: len(assigned(first)) == len(assigned(second)) == 1, "a partition to move"
            )
            [moved] = assigned(second)
            first.set_paused(False)  # slots free again: what is assigned now resumes
        # The second member left: its partition comes back to the first, which is not paused any more.
        poll_until([first], lambda _: assigned(first) == {0, 1}, "the partition to come back")
        produce(kafka_brokers, topic, moved, b"wake-up")
        received = poll_until([first], bool, f"the message on partition {moved}")
        assert [(d.partition, d.value) for d in received] == [(moved, b"wake-up")]
