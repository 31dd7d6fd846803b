"""Benchmarks (not tests): `python -m loadtest.bench SCENARIO [--json FILE]`.

Each scenario measures jobsched as configured and the reference setting in the same run, against the
servers in MONGO_URI / KAFKA_BROKERS (start them with `make servers-up`), and prints both with the ratio
(> 1 means jobsched is better).

Scenarios
  dispatch  a backlog of N due jobs: claim + publish throughput (jobs/s) of the real leader loop,
            batched claims (CLAIM_BATCH, default 500) vs the reference (one findOneAndUpdate per job,
            20 per 500 ms tick). The reference run is time-boxed (it would need N/40 s at best).
  drain     N due noop jobs from pending to completed through real processes (a scheduler and a noop
            executor): jobs/s as configured vs the reference setting (batch 20, tick 500 ms, one handler at
            a time), the reference time-boxed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pymongo import MongoClient

from services.scheduler.dispatcher import Dispatcher
from services.scheduler.leader import Scheduler
from shared.bus.kafka import KafkaBus
from shared.election.single import SingleNodeElector
from shared.model import Status, utc_now
from shared.store.mongo import KIND_RUN, MongoJobStore

REFERENCE_BATCH = 20
REFERENCE_TICK_S = 0.5


@dataclass
class Run:
    label: str
    jobs: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds else 0.0


def seed_due_jobs(uri: str, database: str, count: int, job_type: str = "noop") -> None:
    client: MongoClient[dict[str, Any]] = MongoClient(uri, tz_aware=True)
    now = utc_now()
    jobs = client[database]["jobs"]
    for start in range(0, count, 1000):
        jobs.insert_many(
            [
                {
                    "idempotencyKey": f"bench-{i}",
                    "tenantId": f"tenant-{i % 7}",
                    "jobType": job_type,
                    "payload": {},
                    "priority": i % 5,
                    "status": Status.PENDING.value,
                    "kind": KIND_RUN,
                    "attempts": 0,
                    "maxAttempts": 3,
                    "scheduledAt": now - timedelta(seconds=count - i),
                    "createdAt": now,
                    "updatedAt": now,
                }
                for i in range(start, min(start + 1000, count))
            ],
            ordered=False,
        )
    client.close()


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


def store_kind(uri: str) -> str:
    client: MongoClient[dict[str, Any]] = MongoClient(uri)
    info = client.admin.command("buildInfo")
    client.close()
    if "ferretdb" in info:
        return f"ferretdb-{os.environ.get('FERRETDB_BACKEND', 'default-backend')}"
    return "mongodb"


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}


def scenario_dispatch(args: argparse.Namespace) -> dict[str, Any]:
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


def report(scenario: str, args: argparse.Namespace, ours: Run, reference: Run) -> dict[str, Any]:
    ratio = ours.rate / reference.rate if reference.rate else float("inf")
    for run in (ours, reference):
        print(f"{run.label:<60} {run.jobs:>7} jobs in {run.seconds:7.2f}s  → {run.rate:9.1f} jobs/s")
    print(f"ratio (jobsched / reference): {ratio:.1f}x")
    return {
        "scenario": scenario,
        "backlog": args.jobs,
        "jobsched": {
            "jobs_per_s": round(ours.rate, 1),
            "jobs": ours.jobs,
            "seconds": round(ours.seconds, 2),
            "setting": ours.label,
        },
        "baseline": {
            "jobs_per_s": round(reference.rate, 1),
            "jobs": reference.jobs,
            "seconds": round(reference.seconds, 2),
            "setting": reference.label,
        },
        "ratio": round(ratio, 2),
        "machine": machine(),
        "store": store_kind(os.environ["MONGO_URI"]),
        "measuredAt": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def measure_drain(uri: str, brokers: str, count: int, env: dict[str, str], time_box_s: float | None) -> Run:
    """Seed `count` due noop jobs, start a scheduler and a noop executor as processes, time until all are
    completed (or the time box ends)."""
    database = f"bench_{uuid.uuid4().hex[:8]}"
    store = MongoJobStore.connect(uri, database)
    store.ensure_schema()
    seed_due_jobs(uri, database, count)
    common = {
        **os.environ,
        "MONGO_URI": uri,
        "MONGO_DB": database,
        "KAFKA_BROKERS": brokers,
        "KAFKA_TOPIC_PREFIX": f"bench-{uuid.uuid4().hex[:8]}-",
        "ELECTION_KEY": f"/bench/{database}",
        "LOG_LEVEL": "WARNING",
        **env,
    }
    client: MongoClient[dict[str, Any]] = MongoClient(uri)
    jobs = client[database]["jobs"]
    processes = []
    started = time.monotonic()
    try:
        for args, port in ((["services.scheduler"], "0"), (["services.executor", "--type", "noop"], "0")):
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-m", *args],
                    env={**common, "METRICS_PORT": port},
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        deadline = started + time_box_s if time_box_s else float("inf")
        while jobs.count_documents({"status": Status.COMPLETED.value}) < count and time.monotonic() < deadline:
            time.sleep(0.5)
        elapsed = time.monotonic() - started
        done = jobs.count_documents({"status": Status.COMPLETED.value})
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(60)
        client.drop_database(database)
        client.close()
        store.close()
    setting = ", ".join(f"{k}={v}" for k, v in env.items()) or "defaults"
    return Run(setting, done, elapsed)


def scenario_drain(args: argparse.Namespace) -> dict[str, Any]:
    uri, brokers = os.environ["MONGO_URI"], os.environ["KAFKA_BROKERS"]
    ours = measure_drain(uri, brokers, args.jobs, {"CLAIM_BATCH": str(args.batch)}, None)
    reference = measure_drain(
        uri,
        brokers,
        args.jobs,
        {"CLAIM_MODE": "single", "CLAIM_BATCH": "20", "SCHEDULER_TICK": "500ms", "EXECUTOR_CONCURRENCY": "1"},
        args.reference_seconds,
    )
    return report("drain", args, ours, reference)


SCENARIOS = {"dispatch": scenario_dispatch, "drain": scenario_drain}


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m loadtest.bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--jobs", type=int, default=20_000, help="backlog size (default 20000)")
    parser.add_argument("--batch", type=int, default=500, help="jobsched claim batch (default 500)")
    parser.add_argument(
        "--reference-seconds", type=float, default=60.0, help="time box of the reference run (default 60)"
    )
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    result = SCENARIOS[args.scenario](args)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=2)


if __name__ == "__main__":
    main()
