"""`dispatch`: a backlog of N due jobs, claim + publish throughput (jobs/s) of the real leader loop (in this
process), batched claims (CLAIM_BATCH, default 500) vs the reference (one findOneAndUpdate per job, 20 per
500 ms tick). The reference run is time-boxed (it would need N/40 s at best)."""

from __future__ import annotations

import argparse
import os
import threading
import time
import uuid
from typing import Any

from pymongo import MongoClient

from loadtest.benchkit import REFERENCE_BATCH, REFERENCE_TICK_S, Run, Scenario, report, seed_due_jobs
from services.scheduler.dispatcher import Dispatcher
from services.scheduler.leader import Scheduler
from shared.bus.kafka import KafkaBus
from shared.election.single import SingleNodeElector
from shared.model import Status
from shared.store.mongo import MongoJobStore


def measure_dispatch(
    uri: str, brokers: str, count: int, *, mode: str, batch: int, tick_s: float, time_box_s: float | None
) -> Run:
    database = f"bench_{uuid.uuid4().hex[:8]}"
    prefix = f"bench-{uuid.uuid4().hex[:8]}-"
    store = MongoJobStore.connect(uri, database)
    store.ensure_schema()
    seed_due_jobs(uri, database, count)
    bus = KafkaBus(brokers, partitions=6, topic_prefix=prefix)
    bus.ensure_topics(["noop"])
    dispatcher = Dispatcher(store, bus, ["noop"], batch=batch, mode=mode)
    scheduler = Scheduler(SingleNodeElector(), dispatcher, bus, ["noop"], tick_s=tick_s)
    client: MongoClient[dict[str, Any]] = MongoClient(uri)
    jobs = client[database]["jobs"]
    started = time.monotonic()
    thread = threading.Thread(target=scheduler.run, daemon=True)
    thread.start()
    deadline = started + time_box_s if time_box_s else float("inf")
    while True:
        queued = jobs.count_documents({"status": Status.QUEUED.value})
        if queued >= count or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    elapsed = time.monotonic() - started
    scheduler.request_stop()
    thread.join(30)
    queued = jobs.count_documents({"status": Status.QUEUED.value})
    client.drop_database(database)
    client.close()
    bus.close()
    store.close()
    return Run(f"{mode} batch={batch} tick={tick_s * 1000:.0f}ms", queued, elapsed)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=20_000, help="backlog size (default 20000)")
    parser.add_argument("--batch", type=int, default=500, help="jobsched claim batch (default 500)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    uri, brokers = os.environ["MONGO_URI"], os.environ["KAFKA_BROKERS"]
    ours = measure_dispatch(uri, brokers, args.jobs, mode="batch", batch=args.batch, tick_s=0.5, time_box_s=None)
    reference = measure_dispatch(
        uri,
        brokers,
        args.jobs,
        mode="single",
        batch=REFERENCE_BATCH,
        tick_s=REFERENCE_TICK_S,
        time_box_s=args.reference_seconds,
    )
    return report("dispatch", args, ours, reference)


SCENARIO = Scenario("dispatch", "claim + publish throughput of the leader loop (jobs/s)", add_arguments, run)
