"""The Bus on Apache Kafka (confluent-kafka). Topics `jobs.dispatch.<type>` and `jobs.dlq`."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from shared.bus.base import DLQ_TOPIC, Wakeup, dispatch_topic

log = logging.getLogger("jobsched.bus")


class KafkaBus:
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
        config: dict[str, Any] = {
            "bootstrap.servers": brokers,
            # Wake-ups are latency-sensitive and tiny: send almost at once, but let a burst share a batch.
            "linger.ms": 2,
            "acks": "all",
            "enable.idempotence": True,
            # A broker outage fails a delivery within this bound instead of queueing forever; the
            # scheduler then puts the job back to pending.
            "message.timeout.ms": delivery_timeout_ms,
            "queue.buffering.max.messages": 500_000,
            "logger": logging.getLogger("jobsched.kafka"),
        }
        self._producer = Producer(config)

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
        wanted = {self.topic(t) for t in job_types} | {self.dlq_topic}
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
        self._producer.flush(self._delivery_timeout_ms / 1000 + 5)
        return [w for i, w in enumerate(wakeups) if i not in delivered]

    def _produce(self, topic: str, value: bytes, key: str, callback: Any) -> None:
        while True:
            try:
                self._producer.produce(topic, value=value, key=key, on_delivery=callback)
                return
            except BufferError:
                self._producer.poll(0.1)  # local queue full: let deliveries drain, then retry

    def close(self) -> None:
        self._producer.flush(5)
