"""`peers-embedded`: the embedded drain against what a Python team would run on one machine instead. jobsched:
N due noop jobs drained by `jobsched dev` on its SQLite file (WAL, synchronous=FULL), timed from the process
start until every job is completed (the `embedded` measurement), with the process's CPU per job and peak
memory. Peer: APScheduler 3 with its SQLAlchemyJobStore on a SQLite file in WAL mode (synchronous=FULL as
well), N date-trigger jobs due now persisted before the run, the default ThreadPoolExecutor (10 workers), timed
from `resume()` until every job has run (as in `peer`). Both report CPU per job: the machine's and their own
process's. Targets: ratio >= 1, >= 2,500 jobs/s, <= 0.4 ms CPU per job, peak RSS < 200 MB."""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import apscheduler
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from sqlalchemy import create_engine, event

from loadtest.benchkit import Run, Scenario, report, target
from loadtest.scenarios.embedded import measure_embedded
from loadtest.scenarios.peer import run_apscheduler

TARGET_JOBS_PER_S = 2500.0
TARGET_CPU_MS_PER_JOB = 0.4
TARGET_PEAK_RSS_MB = 200.0


def measure_apscheduler_sqlite(count: int, time_box_s: float) -> tuple[Run, dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="apscheduler-sqlite-") as folder:
        engine = create_engine(f"sqlite:///{Path(folder) / 'jobs.sqlite'}")

        @event.listens_for(engine, "connect")
        def wal_mode(connection: sqlite3.Connection, record: object) -> None:
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = FULL")

        try:
            label = f"APScheduler {apscheduler.__version__}: SQLAlchemyJobStore on SQLite (WAL), ThreadPoolExecutor(10)"
            return run_apscheduler(SQLAlchemyJobStore(engine=engine), label, count, time_box_s)
        finally:
            engine.dispose()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=20_000, help="due jobs (default 20000)")
    parser.add_argument("--peer-seconds", type=float, default=600.0, help="time box of the APScheduler run")


def run(args: argparse.Namespace) -> dict[str, Any]:
    ours = measure_embedded(args.jobs, {}, None)
    peer, times = measure_apscheduler_sqlite(args.jobs, args.peer_seconds)
    result = report("peers-embedded", args, ours, peer, store="sqlite")
    result["baseline"].update(times)
    cpu_ms = ours.cpu_ms_per_job.get("own_processes", float("nan"))
    rss_mb = ours.extra["peak_rss_mb"]
    result["targets"] = {
        "faster_than_peer": target("jobs/s >= APScheduler's in the same run", result["ratio"], result["ratio"] >= 1),
        "jobs_per_s": target(f"jobs/s >= {TARGET_JOBS_PER_S:g}", round(ours.rate, 1), ours.rate >= TARGET_JOBS_PER_S),
        "cpu_ms_per_job": target(f"CPU per job <= {TARGET_CPU_MS_PER_JOB} ms", cpu_ms, cpu_ms <= TARGET_CPU_MS_PER_JOB),
        "peak_rss_mb": target(f"peak RSS < {TARGET_PEAK_RSS_MB:g} MB", rss_mb, rss_mb < TARGET_PEAK_RSS_MB),
    }
    for name, figure in result["targets"].items():
        print(f"target {name}: {figure['target']}: {figure['value']} {'met' if figure['met'] else 'MISSED'}")
    return result


SCENARIO = Scenario(
    "peers-embedded", "`jobsched dev` drain vs APScheduler 3 on SQLite (WAL), with CPU per job", add_arguments, run
)
