"""What every benchmark scenario shares: the scenario record, the JSON envelope, the machine and store
descriptions, and seeding jobs straight into a MongoDB-compatible store.

A scenario's result is `{"scenario", "jobsched": {figures}, "baseline": {figures}, "ratio", "machine",
"store", ...}`; `ratio` > 1 always means jobsched is better (jobsched ÷ baseline for rates, baseline ÷
jobsched for latencies), and `targets` (where a scenario has any) says which goals were met.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pymongo import MongoClient
from pymongo.errors import PyMongoError

from shared.backends import open_backend, sqlite_url
from shared.config import ConfigError
from shared.model import Status, utc_now
from shared.store.base import NewJob
from shared.store.transitions import KIND_RUN

Figures = dict[str, Any]
REFERENCE_BATCH = 20
REFERENCE_TICK_S = 0.5
# The reference setting of every pipeline scenario: one findOneAndUpdate per job (REFERENCE_CLAIMS, read by
# loadtest.procs: the scheduler runs under loadtest.reference), 20 per 500 ms tick, one handler at a time.
REFERENCE_CLAIMS = "BENCH_CLAIMS"
REFERENCE_ENV = {
    REFERENCE_CLAIMS: "single",
    "CLAIM_BATCH": "20",
    "SCHEDULER_TICK": "500ms",
    "EXECUTOR_CONCURRENCY": "1",
}


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], dict[str, Any]]


@dataclass
class Run:
    label: str
    jobs: int
    seconds: float
    # CPU milliseconds per job, where measured (loadtest/cpu.py): "machine", "own_processes"
    cpu_ms_per_job: dict[str, float] = field(default_factory=dict)
    # scenario-specific figures (e.g. peak_rss_mb), added to figures() as they are
    extra: Figures = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds else 0.0

    def figures(self) -> Figures:
        figures: Figures = {
            "jobs_per_s": round(self.rate, 1),
            "jobs": self.jobs,
            "seconds": round(self.seconds, 2),
            "setting": self.label,
        }
        if self.cpu_ms_per_job:
            figures["cpu_ms_per_job"] = self.cpu_ms_per_job
        figures.update(self.extra)
        return figures


def server_setting(name: str) -> str:
    """A server's address the benchmarks read from the environment (MONGO_URI, KAFKA_BROKERS, ETCD_ENDPOINTS),
    or ConfigError naming how to get it: a one-line error instead of a KeyError's traceback."""
    value = os.environ.get(name)
    if not value:
        raise ConfigError(
            f"{name} is not set: start the local servers (bash deployments/local/servers.sh start), then "
            f'eval "$(bash deployments/local/servers.sh env)" and export MONGO_URI KAFKA_BROKERS ETCD_ENDPOINTS'
        )
    return value


def ratio(better_when_higher: bool, ours: float, baseline: float) -> float:
    """jobsched ÷ baseline for a rate, baseline ÷ jobsched for a latency: > 1 means jobsched is better. Kept to three
    significant figures, so that a small ratio (a silent loop against one reporting) stays above zero."""
    top, bottom = (ours, baseline) if better_when_higher else (baseline, ours)
    if math.isnan(top) or math.isnan(bottom):
        return math.nan
    if bottom <= 0:
        return math.inf if top > 0 else math.nan
    return float(f"{top / bottom:.3g}")


def target(description: str, value: float, met: bool) -> Figures:
    return {"target": description, "value": value, "met": met}


def envelope(
    scenario: str, ours: Figures, baseline: Figures, ratio_value: float, store: str, **extra: Any
) -> dict[str, Any]:
    """The JSON every scenario writes (stable keys first, scenario-specific ones after)."""
    return {
        "scenario": scenario,
        "jobsched": ours,
        "baseline": baseline,
        "ratio": ratio_value,
        "machine": machine(),
        "store": store,
        **extra,
        "measuredAt": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def report(
    scenario: str, args: argparse.Namespace, ours: Run, reference: Run, store: str | None = None
) -> dict[str, Any]:
    """Print and package two throughput runs (jobs/s, higher is better)."""
    value = ratio(True, ours.rate, reference.rate)
    for run in (ours, reference):
        print_run(run)
    print(f"ratio (jobsched / baseline): {value:.1f}x")
    return envelope(
        scenario,
        ours.figures(),
        reference.figures(),
        value,
        store or store_kind(server_setting("MONGO_URI")),
        backlog=args.jobs,
    )


def print_run(run: Run) -> None:
    """One throughput run's line (jobs, seconds, jobs/s), and its CPU per job where measured."""
    print(f"{run.label:<60} {run.jobs:>7} jobs in {run.seconds:7.2f}s  → {run.rate:9.1f} jobs/s")
    if run.cpu_ms_per_job:
        cpu = ", ".join(f"{where} {ms} ms" for where, ms in run.cpu_ms_per_job.items())
        print(f"{'':<60} CPU per job: {cpu}")


def machine() -> dict[str, Any]:
    load1, load5, load15 = os.getloadavg()
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_at_end": [round(load1, 2), round(load5, 2), round(load15, 2)],
    }


def store_kind(uri: str) -> str:
    """`mongodb-<version>`, or `ferretdb-<version>` for FerretDB (which names itself in buildInfo)."""
    client: MongoClient[dict[str, Any]] = MongoClient(uri, serverSelectionTimeoutMS=5000)
    try:
        info = client.admin.command("buildInfo")
    finally:
        client.close()
    ferretdb = info.get("ferretdb")
    if isinstance(ferretdb, dict):
        return f"ferretdb-{ferretdb.get('version', 'unknown')}"
    return f"mongodb-{info.get('version', 'unknown')}"


def first_starts(jobs: Any, query: dict[str, Any]) -> dict[str, datetime]:
    """By job id, when the first attempt of each job matching `query` started, for those that started one: from
    its history (an ended first attempt), else from the job itself while that attempt is open."""
    found: dict[str, datetime] = {}
    for doc in jobs.find(query, {"history": 1, "status": 1, "attempts": 1, "claimedAt": 1}):
        first = next((e for e in doc.get("history") or [] if e.get("attempt") == 1), None)
        if first is not None and first.get("startedAt") is not None:
            found[str(doc["_id"])] = first["startedAt"]
        elif doc.get("attempts", 0) == 0 and doc.get("status") == Status.RUNNING.value and doc.get("claimedAt"):
            found[str(doc["_id"])] = doc["claimedAt"]
    return found


def job_document(
    key: str, n: int, scheduled_at: datetime, now: datetime, job_type: str = "noop", tenants: int = 7
) -> dict[str, Any]:
    """A pending one-off noop job as the MongoDB store keeps it (what the API would have inserted), of one of
    `tenants` tenants."""
    return {
        "idempotencyKey": key,
        "tenantId": f"tenant-{n % tenants}",
        "jobType": job_type,
        "payload": {},
        "priority": n % 5,
        "status": Status.PENDING.value,
        "kind": KIND_RUN,
        "attempts": 0,
        "maxAttempts": 3,
        "scheduledAt": scheduled_at,
        "createdAt": now,
        "updatedAt": now,
    }


def seed_jobs(
    uri: str,
    database: str,
    count: int,
    scheduled_at: Callable[[int], datetime],
    *,
    key_prefix: str = "bench",
    job_type: str = "noop",
    chunk: int = 1000,
    before_chunk: Callable[[datetime], None] | None = None,
    tenants: int = 7,
) -> None:
    """Insert `count` pending jobs, job n scheduled at `scheduled_at(n)`, in chunks of `chunk` (in n order).
    `before_chunk(first scheduledAt of the chunk)` runs before each chunk is inserted."""
    client: MongoClient[dict[str, Any]] = MongoClient(uri, tz_aware=True)
    now = utc_now()
    jobs = client[database]["jobs"]
    try:
        for start in range(0, count, chunk):
            if before_chunk is not None:
                before_chunk(scheduled_at(start))
            docs = [
                job_document(f"{key_prefix}-{i}", i, scheduled_at(i), now, job_type, tenants)
                for i in range(start, min(start + chunk, count))
            ]
            jobs.insert_many(docs, ordered=False)
    finally:
        client.close()


def seed_due_jobs(uri: str, database: str, count: int, job_type: str = "noop") -> None:
    """`count` jobs all due, the oldest first (job n due count-n seconds ago)."""
    now = utc_now()
    seed_jobs(uri, database, count, lambda n: now - timedelta(seconds=count - n), job_type=job_type)


def seed_sqlite(
    path: str | os.PathLike[str], count: int, scheduled_at: Callable[[int], datetime], key_prefix: str
) -> None:
    """Insert `count` pending noop jobs into the SQLite store at `path` through SqliteJobStore."""
    jobs = [
        NewJob(
            idempotencyKey=f"{key_prefix}-{n}",
            tenantId=f"tenant-{n % 7}",
            jobType="noop",
            scheduledAt=scheduled_at(n),
            priority=n % 5,
        )
        for n in range(count)
    ]
    seed_sqlite_jobs(path, jobs)


def seed_sqlite_jobs(path: str | os.PathLike[str], jobs: Sequence[NewJob], chunk: int = 500) -> None:
    """Write `jobs` into the SQLite store at `path` (created), `chunk` a transaction."""
    store = open_backend(sqlite_url(os.path.abspath(path)), durable=False).jobs
    try:
        store.ensure_schema()
        for first in range(0, len(jobs), chunk):
            store.create_many(jobs[first : first + chunk])
    finally:
        store.close()


def setting_label(env: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in env.items()) or "defaults"


def unique_name(prefix: str = "bench") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


DROP_TIMEOUT_S = 120


def drop_database(uri: str, name: str) -> None:
    """Drop `name`, waiting DROP_TIMEOUT_S at most: a drop waits for the locks of every operation on the database,
    and one that never ends (a scan looping in an index) would hold the benchmark forever after its figures were
    taken. A drop that fails is said, and the database left behind."""
    client: MongoClient[dict[str, Any]] = MongoClient(
        uri, serverSelectionTimeoutMS=10_000, socketTimeoutMS=DROP_TIMEOUT_S * 1000
    )
    try:
        client.drop_database(name)
    except PyMongoError as exc:
        print(f"database {name} left behind: dropping it failed: {exc}", file=sys.stderr, flush=True)
    finally:
        client.close()


@contextmanager
def scratch_database(uri: str) -> Iterator[str]:
    """A fresh database with jobsched's schema, dropped afterwards: its name."""
    name = unique_name()
    store = open_backend(uri, database=name).jobs
    try:
        store.ensure_schema()
        yield name
    finally:
        store.close()
        drop_database(uri, name)
