"""`dispatch`: a backlog of N due jobs, claim + publish throughput (jobs/s) of the real leader loop (in this
process), batched claims (CLAIM_BATCH, default 500) vs the reference (one findOneAndUpdate per job, 20 per
500 ms tick). The reference run is time-boxed (it would need N/40 s at best)."""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from typing import Any

from prometheus_client import REGISTRY
from pymongo import MongoClient

from loadtest.benchkit import (
    REFERENCE_BATCH,
    REFERENCE_TICK_S,
    Run,
    Scenario,
    report,
    scratch_database,
    seed_due_jobs,
    server_setting,
)
from loadtest.procs import count_until
from loadtest.reference import MongoClaimNext, ReferenceDispatcher
from services.scheduler.dispatcher import Dispatcher
from services.scheduler.scheduler import Scheduler
from shared.backends import open_backend
from shared.bus.kafka import KafkaBus
from shared.election.single import SingleNodeElector
from shared.model import Status


def claimed_so_far() -> float:
    return REGISTRY.get_sample_value("scheduler_jobs_claimed_total", {"job_type": "noop"}) or 0.0


def count_queued(uri: str, database: str) -> int:
    client: MongoClient[dict[str, Any]] = MongoClient(uri)
    try:
        return client[database]["jobs"].count_documents({"status": Status.QUEUED.value})
    finally:
        client.close()


def measure_dispatch(
    uri: str, brokers: str, count: int, *, reference: bool, batch: int, tick_s: float, time_box_s: float | None
) -> Run:
    with scratch_database(uri) as database:
        seed_due_jobs(uri, database, count)
        store = open_backend(uri, database=database).jobs
        bus = KafkaBus(brokers, partitions=6, topic_prefix=f"bench-{uuid.uuid4().hex[:8]}-")
        claim_next = MongoClaimNext(uri, database)
        try:
            bus.ensure_topics(["noop"])
            dispatcher = (
                ReferenceDispatcher(store, bus, ["noop"], batch=batch, claim=claim_next)
                if reference
                else Dispatcher(store, bus, ["noop"], batch=batch)
            )
            scheduler = Scheduler(SingleNodeElector(), dispatcher, bus, ["noop"], tick_s=tick_s)
            # Progress from this process's own counter, not count queries that would load the measured store.
            before = claimed_so_far()
            started = time.monotonic()
            thread = threading.Thread(target=scheduler.run, daemon=True)
            thread.start()
            count_until(lambda: int(claimed_so_far() - before), count, started, time_box_s)
            # ...then the exact figure: a claimed batch is queued once its wake-ups are published.
            queued, elapsed = count_until(lambda: count_queued(uri, database), count, started, time_box_s)
            scheduler.request_stop()
            thread.join(30)
        finally:
            claim_next.close()
            bus.close()
            store.close()
    mode = "single" if reference else "batch"
    return Run(f"{mode} batch={batch} tick={tick_s * 1000:.0f}ms", queued, elapsed)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=20_000, help="backlog size (default 20000)")
    parser.add_argument("--batch", type=int, default=500, help="jobsched claim batch (default 500)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    uri, brokers = server_setting("MONGO_URI"), server_setting("KAFKA_BROKERS")
    ours = measure_dispatch(uri, brokers, args.jobs, reference=False, batch=args.batch, tick_s=0.5, time_box_s=None)
    reference = measure_dispatch(
        uri,
        brokers,
        args.jobs,
        reference=True,
        batch=REFERENCE_BATCH,
        tick_s=REFERENCE_TICK_S,
        time_box_s=args.reference_seconds,
    )
    return report("dispatch", args, ours, reference)


SCENARIO = Scenario("dispatch", "claim + publish throughput of the leader loop (jobs/s)", add_arguments, run)
