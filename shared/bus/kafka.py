"""The Bus on Apache Kafka (confluent-kafka). Topics `jobs.dispatch.<type>` and `jobs.dlq`."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from shared import jsonsafe, metrics
from shared.bus.base import DLQ_TOPIC, EVENTS_TOPIC, Delivery, Wakeup, consumer_group, dispatch_topic
from shared.bus.offsets import OffsetTracker

log = logging.getLogger("jobsched.bus")
RECORD_LINGER_MS = 50  # how long an event or dead-letter record may wait to share a produce request
RECORD_POLL_S = 0.1  # how often publishing a record also serves the records' failure reports
FETCH_BATCH = 64  # messages a subscription takes from the client at once


class KafkaBus:
    carries_events = True  # to jobs.events, for whoever consumes it

    def __init__(
        self,
        brokers: str,
        *,
        partitions: int = 6,
        topic_prefix: str = "",
        delivery_timeout_ms: int = 10_000,
    ) -> None:
        self._brokers = brokers
        self._partitions = partitions
        self._prefix = topic_prefix
        self._delivery_timeout_ms = delivery_timeout_ms
        # One producer per kind of message, each made at its first use (a process publishes one kind: the
        # scheduler wake-ups, the executor events; an idle producer still runs librdkafka's threads).
        self._producers_lock = threading.Lock()
        self._wakeup_producer: Producer | None = None
        self._record_producer: Producer | None = None
        self._next_record_poll = 0.0  # monotonic time of the next serving of the records' failure reports

    def _producer_config(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self._brokers,
            "acks": "all",
            "enable.idempotence": True,
            # A broker outage fails a delivery within this bound instead of queueing forever; the
            # scheduler then puts the job back to pending.
            "message.timeout.ms": self._delivery_timeout_ms,
            "queue.buffering.max.messages": 500_000,
            "logger": logging.getLogger("jobsched.kafka"),
        }

    @property
    def _wakeups(self) -> Producer:
        """Wake-ups are latency-sensitive and tiny: sent almost at once, a burst sharing a batch; every
        delivery is reported, since the scheduler puts back the jobs whose wake-up did not land."""
        if self._wakeup_producer is None:
            with self._producers_lock:
                if self._wakeup_producer is None:
                    self._wakeup_producer = Producer({**self._producer_config(), "linger.ms": 2})
        return self._wakeup_producer

    @property
    def _records(self) -> Producer:
        """Events and dead-letter records are best effort and nobody waits for them: they linger so that many
        share one produce request (each request costs the broker threads a round of work and the caller a
        delivery report), and only failed deliveries are reported (they are logged and counted)."""
        if self._record_producer is None:
            with self._producers_lock:
                if self._record_producer is None:
                    config = {**self._producer_config(), "linger.ms": RECORD_LINGER_MS}
                    self._record_producer = Producer({**config, "delivery.report.only.error": True})
        return self._record_producer

    def topic(self, job_type: str) -> str:
        return dispatch_topic(job_type, self._prefix)

    @property
    def dlq_topic(self) -> str:
        return f"{self._prefix}{DLQ_TOPIC}"

    def ensure_topics(self, job_types: Iterable[str]) -> None:
        admin_config: dict[str, Any] = {
            "bootstrap.servers": self._brokers,
            "logger": logging.getLogger("jobsched.kafka"),
        }
        admin = AdminClient(admin_config)
        wanted = {self.topic(t) for t in job_types} | {self.dlq_topic, self.events_topic}
        existing = set(admin.list_topics(timeout=10).topics)
        missing = [
            NewTopic(t, num_partitions=self._partitions, replication_factor=1) for t in sorted(wanted - existing)
        ]
        if not missing:
            return
        for topic, future in admin.create_topics(missing, operation_timeout=10, request_timeout=15).items():
            try:
                future.result()
                log.info("topic created", extra={"action": "topic_created", "topic": topic})
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise

    def publish_wakeups(self, wakeups: Sequence[Wakeup]) -> list[Wakeup]:
        delivered: set[int] = set()

        def on_delivery(index: int) -> Any:
            def callback(err: KafkaError | None, msg: Message) -> None:
                if err is None:
                    delivered.add(index)
                else:
                    log.warning(
                        "delivery failed",
                        extra={"action": "dispatch_error", "jobId": wakeups[index].jobId, "error": str(err)},
                    )

            return callback

        for index, wakeup in enumerate(wakeups):
            self._produce(self.topic(wakeup.jobType), wakeup.encode(), wakeup.jobId, on_delivery(index))
        self._wakeups.flush(self._delivery_timeout_ms / 1000 + 5)
        return [w for i, w in enumerate(wakeups) if i not in delivered]

    def _produce(self, topic: str, value: bytes, key: str, callback: Any) -> None:
        producer = self._wakeups
        while True:
            try:
                producer.produce(topic, value=value, key=key, on_delivery=callback)
                return
            except BufferError:
                producer.poll(0.1)  # local queue full: let deliveries drain, then retry

    @property
    def events_topic(self) -> str:
        return f"{self._prefix}{EVENTS_TOPIC}"

    def subscribe(self, job_type: str) -> KafkaSubscription:
        return KafkaSubscription(self._brokers, self.topic(job_type), consumer_group(job_type, self._prefix))

    def publish_dead_letter(self, record: dict[str, object]) -> None:
        self._publish_best_effort(self.dlq_topic, record)

    def publish_event(self, event: dict[str, object]) -> None:
        self._publish_best_effort(self.events_topic, event)

    def _publish_best_effort(self, topic: str, record: dict[str, object]) -> None:
        producer = self._records
        try:
            key = str(record.get("jobId", ""))
            producer.produce(topic, value=jsonsafe.dumps(record), key=key, on_delivery=_report_failed_record)
        except (BufferError, KafkaException) as exc:
            metrics.BUS_PUBLISH_ERRORS.labels(topic).inc()
            log.warning("publish failed", extra={"action": "publish_failed", "topic": topic, "error": repr(exc)})
        # Serve the failure reports now and then, not at every record: a poll releases the interpreter lock, and
        # taking it back costs a thread switch whenever other threads are busy (close() serves what is left).
        now = time.monotonic()
        if now >= self._next_record_poll:
            self._next_record_poll = now + RECORD_POLL_S
            producer.poll(0)

    def close(self) -> None:
        for producer in (self._wakeup_producer, self._record_producer):
            if producer is not None:
                producer.flush(5)


def _report_failed_record(err: KafkaError | None, msg: Message) -> None:
    """The delivery report of an event or dead-letter record (only failures are reported)."""
    if err is not None:
        topic = msg.topic() or ""
        metrics.BUS_PUBLISH_ERRORS.labels(topic).inc()
        log.warning("publish failed", extra={"action": "publish_failed", "topic": topic, "error": str(err)})


class KafkaSubscription:
    """A consumer in group `<prefix>executor-<type>` with manual commits of acknowledged, contiguous offsets."""

    COMMIT_INTERVAL_S = 0.2
    SESSION_TIMEOUT_S = 10

    def __init__(self, brokers: str, topic: str, group: str) -> None:
        config: dict[str, Any] = {
            "bootstrap.servers": brokers,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "cooperative-sticky",
            # Notice new partitions and topics within seconds, not the default 5 minutes.
            "topic.metadata.refresh.interval.ms": 10_000,
            # A crashed executor's partitions move to a live one after this (default 45 s); its unfinished
            # messages are redelivered there and the attempt records turn them into skips.
            "session.timeout.ms": self.SESSION_TIMEOUT_S * 1000,
            "heartbeat.interval.ms": 2_000,
            "logger": logging.getLogger("jobsched.kafka"),
        }
        self._consumer = Consumer(config)
        self._offsets: OffsetTracker[tuple[str, int]] = OffsetTracker()
        self._fetched: deque[Message] = deque()  # taken from the client, not handed out yet (not received)
        self._last_commit = 0.0
        self._paused = False
        self._consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)

    def set_paused(self, paused: bool) -> None:
        self._paused = paused
        assignment = self._consumer.assignment()
        if assignment:
            (self._consumer.pause if paused else self._consumer.resume)(assignment)

    def poll(self, timeout_s: float) -> Delivery | None:
        self._commit(asynchronous=True)
        if self._paused:
            self.set_paused(True)  # partitions assigned by a rebalance since the pause start unpaused
        message = self._next_message(timeout_s)
        if message is None:
            return None
        if message.error() is not None:
            log.warning("consume error", extra={"action": "consume_error", "error": str(message.error())})
            return None
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        assert topic is not None
        assert partition is not None
        assert offset is not None
        self._offsets.received((topic, partition), offset)
        return Delivery(value=message.value(), topic=topic, partition=partition, offset=offset)

    def _next_message(self, timeout_s: float) -> Message | None:
        """The next fetched message: what the client holds already is taken in one call, up to FETCH_BATCH (each
        call into the client releases the interpreter lock, and taking it back costs a thread switch while other
        threads are busy); a paused subscription hands out nothing of that (its caller only keeps the
        membership alive)."""
        if self._paused:
            return self._consumer.poll(timeout_s)
        if not self._fetched:
            fetched = self._consumer.consume(FETCH_BATCH, 0)  # may run _on_revoke, which replaces _fetched
            self._fetched.extend(fetched)
        if self._fetched:
            return self._fetched.popleft()
        return self._consumer.poll(timeout_s)

    def _drop_fetched(self, keys: list[tuple[str, int]]) -> None:
        """Forget the fetched messages of partitions no longer ours: their next owner receives them."""
        gone = set(keys)
        self._fetched = deque(m for m in self._fetched if (m.topic(), m.partition()) not in gone)

    def ack(self, delivery: Delivery) -> None:
        self._offsets.acked((delivery.topic, delivery.partition), delivery.offset)

    def in_flight(self) -> int:
        return self._offsets.in_flight()

    def _commit(self, *, asynchronous: bool, partitions: list[tuple[str, int]] | None = None) -> None:
        if asynchronous and time.monotonic() - self._last_commit < self.COMMIT_INTERVAL_S:
            return
        self._last_commit = time.monotonic()
        positions = self._offsets.positions_to_commit(partitions)
        if not positions:
            return
        offsets = [TopicPartition(topic, partition, offset) for (topic, partition), offset in positions.items()]
        try:
            if asynchronous:
                self._consumer.commit(offsets=offsets, asynchronous=True)
            else:
                self._consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            # Sent again by the next commit: one refused while the group rebalances (a member that closes commits
            # once more when its partitions are revoked) must not lose what was acknowledged.
            self._offsets.commit_failed(positions)
            log.warning("commit failed", extra={"action": "commit_failed", "error": repr(exc)})

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Partitions given to this member take the subscription's pause state now. librdkafka keeps a partition's
        pause across a rebalance: one paused, lost (a broker restart, a session timeout) while paused, and given
        back after the subscription resumed (which found it unassigned) would stay paused for good, and the
        executor would consume nothing from it again."""
        consumer.incremental_assign(partitions)
        if partitions:
            (consumer.pause if self._paused else consumer.resume)(partitions)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        keys = [(p.topic, p.partition) for p in partitions]
        self._commit(asynchronous=False, partitions=keys)
        self._offsets.forget(keys)
        self._drop_fetched(keys)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        keys = [(p.topic, p.partition) for p in partitions]
        self._offsets.forget(keys)  # already someone else's: no commit
        self._drop_fetched(keys)

    def close(self) -> None:
        """Commit what was acknowledged, leave the group, close the client. Leaving first (unsubscribe, then serve
        the revocations until nothing is assigned) keeps librdkafka's close out of a rebalance in progress: a
        cooperative member closed while an incremental assignment reaches it can wait forever (a known defect of
        the client, which once hung a test run here). Should the close still not return, the client is abandoned
        to a daemon thread after the session timeout, the time the broker takes to drop the member anyway, and
        the process shuts down."""
        deadline = time.monotonic() + self.SESSION_TIMEOUT_S
        self._last_commit = 0.0
        self._commit(asynchronous=False)
        try:
            self._consumer.unsubscribe()
            while self._consumer.assignment() and time.monotonic() < deadline:
                self._consumer.poll(0.05)  # runs _on_revoke; a message it returns is left to the next owner
        except (KafkaException, RuntimeError) as exc:
            log.warning("leaving the group failed", extra={"action": "consumer_leave_failed", "error": repr(exc)})
        closing = threading.Thread(target=self._consumer.close, name="kafka-consumer-close", daemon=True)
        closing.start()
        closing.join(max(deadline - time.monotonic(), 1.0))
        if closing.is_alive():
            log.warning("consumer close did not return", extra={"action": "consumer_close_abandoned"})
