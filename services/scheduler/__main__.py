"""`jobsched scheduler` / `python -m services.scheduler`: elected dispatcher of due jobs."""

from __future__ import annotations

import os
import signal
import socket
from types import FrameType

from services.scheduler.dispatcher import Dispatcher
from services.scheduler.leader import Scheduler
from shared.bus.kafka import KafkaBus
from shared.config import Settings
from shared.election.etcd import EtcdElector
from shared.handlers import registry
from shared.logging import configure_logging
from shared.metrics import serve_metrics
from shared.store.mongo import MongoJobStore


def main() -> None:
    settings = Settings.from_env()
    configure_logging("scheduler", settings.log_level)
    node_id = os.environ.get("NODE_ID") or f"{socket.gethostname()}-{os.getpid()}"
    store = MongoJobStore.connect(
        settings.mongo_uri, settings.mongo_db, timeout_ms=int(settings.mongo_timeout.total_seconds() * 1000)
    )
    bus = KafkaBus(
        settings.kafka_brokers, partitions=settings.kafka_partitions, topic_prefix=settings.kafka_topic_prefix
    )
    elector = EtcdElector(
        settings.etcd_endpoints, settings.election_key, node_id, ttl_s=int(settings.lease_ttl.total_seconds())
    )
    job_types = registry.names()
    dispatcher = Dispatcher(store, bus, job_types, batch=settings.claim_batch, mode=settings.claim_mode)
    scheduler = Scheduler(elector, dispatcher, bus, job_types, tick_s=settings.scheduler_tick.total_seconds())

    def on_signal(signum: int, frame: FrameType | None) -> None:
        scheduler.request_stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    serve_metrics(settings.metrics_port)
    try:
        scheduler.run()
    finally:
        bus.close()
        store.close()


if __name__ == "__main__":
    main()
