"""The Bus contract, run against every implementation: in-process memory and Kafka."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from bson import ObjectId
from confluent_kafka.admin import AdminClient
from prometheus_client import REGISTRY

from shared.bus.base import Bus, Delivery, Subscription, Wakeup, consumer_group
from shared.bus.kafka import KafkaBus, KafkaSubscription
from shared.bus.memory import MemoryBus

DEADLINE_S = 30


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.servers)])
def bus(request: pytest.FixtureRequest) -> Iterator[Bus]:
    if request.param == "memory":
        yield MemoryBus()
        return
    brokers = request.getfixturevalue("kafka_brokers")
    prefix = request.getfixturevalue("topic_prefix")
    kafka = KafkaBus(brokers, partitions=2, topic_prefix=prefix)
    yield kafka
    kafka.close()


def wakeups(count: int, job_type: str = "noop") -> list[Wakeup]:
    return [Wakeup(jobId=str(ObjectId()), jobType=job_type, priority=i % 3) for i in range(count)]


def drain(subscriptions: list[Subscription], expected: int) -> list[Delivery]:
    """Poll every subscription until `expected` deliveries arrived (or the deadline)."""
    got: list[Delivery] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < expected and time.monotonic() < deadline:
        for subscription in subscriptions:
            delivery = subscription.poll(0.1)
            if delivery is not None:
                got.append(delivery)
                subscription.ack(delivery)
    return got


def test_published_wakeups_reach_their_type_subscriber_intact(bus: Bus) -> None:
    bus.ensure_topics(["noop", "slow"])
    noop, slow = wakeups(20), wakeups(5, "slow")
    assert bus.publish_wakeups(noop + slow) == []
    noop_sub, slow_sub = bus.subscribe("noop"), bus.subscribe("slow")
    try:
        assert sorted(d.read_wakeup().jobId for d in drain([noop_sub], 20)) == sorted(w.jobId for w in noop)
        assert {d.read_wakeup() for d in drain([slow_sub], 5)} == set(slow)
    finally:
        noop_sub.close()
        slow_sub.close()


def test_subscribers_of_one_type_share_the_messages(bus: Bus) -> None:
    bus.ensure_topics(["noop"])
    first, second = bus.subscribe("noop"), bus.subscribe("noop")
    try:
        sent = wakeups(30)
        assert bus.publish_wakeups(sent) == []
        got = drain([first, second], 30)
        assert {d.read_wakeup().jobId for d in got} == {w.jobId for w in sent}
    finally:
        first.close()
        second.close()


def test_events_and_dead_letters_never_raise(bus: Bus) -> None:
    bus.ensure_topics(["noop"])
    bus.publish_event({"event": "job.execution.started", "jobId": "x"})
    bus.publish_dead_letter({"id": "x", "status": "dlq"})


def test_kafka_reports_undelivered_wakeups_and_never_raises_when_down(topic_prefix: str) -> None:
    dead = KafkaBus("127.0.0.1:1", topic_prefix=topic_prefix, delivery_timeout_ms=1000)
    try:
        sent = wakeups(3)
        assert dead.publish_wakeups(sent) == sent
        dead.publish_event({"event": "x", "jobId": "y"})
    finally:
        dead.close()


def test_kafka_counts_events_the_broker_never_took(topic_prefix: str) -> None:
    dead = KafkaBus("127.0.0.1:1", topic_prefix=topic_prefix, delivery_timeout_ms=1000)
    topic = {"topic": dead.events_topic}
    before = REGISTRY.get_sample_value("bus_publish_errors_total", topic) or 0.0
    dead.publish_event({"event": "job.execution.started", "jobId": "x"})
    dead.publish_event({"event": "job.execution.succeeded", "jobId": "x"})
    dead.close()  # serves the failure reports that are left
    assert REGISTRY.get_sample_value("bus_publish_errors_total", topic) == before + 2


def test_kafka_executors_of_one_prefix_form_a_group_of_their_own(kafka_brokers: str, topic_prefix: str) -> None:
    """Deployments (and test runs) that share a broker under different KAFKA_TOPIC_PREFIXes share no consumer
    group: a rebalance of one would stop the other's executors."""
    bus = KafkaBus(kafka_brokers, partitions=1, topic_prefix=topic_prefix)
    bus.ensure_topics(["noop"])
    assert bus.publish_wakeups(wakeups(1)) == []
    subscription = bus.subscribe("noop")
    try:
        assert len(drain([subscription], 1)) == 1  # joined, and given the topic's partition
        group = consumer_group("noop", topic_prefix)
        assert group == f"{topic_prefix}executor-noop"
        admin = AdminClient({"bootstrap.servers": kafka_brokers})
        described = admin.describe_consumer_groups([group])[group].result(timeout=DEADLINE_S)
        assert [{p.topic for p in member.assignment.topic_partitions} for member in described.members] == [
            {bus.topic("noop")}
        ]
    finally:
        subscription.close()
        bus.close()


def test_kafka_members_closed_while_their_group_rebalances_return_and_keep_their_acks(
    kafka_brokers: str, topic_prefix: str
) -> None:
    """Members that join and leave at once (executors restarted together) leave the group before closing: each
    close returns, though a rebalance is under way, and what each acknowledged is not delivered again."""
    bus = KafkaBus(kafka_brokers, partitions=2, topic_prefix=topic_prefix)
    bus.ensure_topics(["noop"])
    sent = wakeups(40)
    assert bus.publish_wakeups(sent) == []
    acked: list[Delivery] = []
    try:
        for _ in range(3):  # each round: two members join, take some, and close while the group settles
            members = [bus.subscribe("noop"), bus.subscribe("noop")]
            for member in members:
                if (delivery := member.poll(1.0)) is not None:
                    member.ack(delivery)
                    acked.append(delivery)
            closing = [threading.Thread(target=member.close) for member in members]
            for thread in closing:
                thread.start()
            for thread in closing:
                thread.join(KafkaSubscription.SESSION_TIMEOUT_S + DEADLINE_S)
            assert not any(thread.is_alive() for thread in closing)
        last = bus.subscribe("noop")
        try:
            rest = drain([last], len(sent) - len(acked))
        finally:
            last.close()
        assert sorted(d.read_wakeup().jobId for d in acked + rest) == sorted(w.jobId for w in sent)
    finally:
        bus.close()


def test_kafka_redelivers_what_was_not_acknowledged(kafka_brokers: str, topic_prefix: str) -> None:
    bus = KafkaBus(kafka_brokers, partitions=1, topic_prefix=topic_prefix)
    bus.ensure_topics(["noop"])
    sent = wakeups(3)
    assert bus.publish_wakeups(sent) == []
    first = bus.subscribe("noop")
    got: list[Delivery] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < 3 and time.monotonic() < deadline:
        if (delivery := first.poll(0.1)) is not None:
            got.append(delivery)
    first.ack(got[0])  # only the first is processed; the executor crashed on the second
    first.close()
    second = bus.subscribe("noop")
    try:
        again = drain([second], 2)
        assert [d.read_wakeup().jobId for d in again] == [w.jobId for w in sent[1:]]
    finally:
        second.close()
        bus.close()
