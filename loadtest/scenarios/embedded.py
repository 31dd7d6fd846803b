"""`embedded`: N due noop jobs drained by `python -m services.dev`, the whole product in one process on its
SQLite store (JOBSCHED_DB in a temporary folder, seeded through SqliteJobStore before the process starts):
jobs/s from the process start until every job is completed (and the CPU per job, and the process's peak
memory), as configured vs the reference setting (single claims, CLAIM_BATCH=20 SCHEDULER_TICK=500ms
EXECUTOR_CONCURRENCY=1, see loadtest/reference.py), the reference time-boxed."""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from loadtest.benchkit import REFERENCE_ENV, Run, Scenario, report, seed_sqlite, setting_label
from loadtest.cpu import CpuWindow, process_cpu_s, process_rss_mb
from loadtest.procs import Service, count_until, free_port, running, wait_until
from shared.model import Status, utc_now


def count_status(path: Path, status: Status, job_type: str | None = None) -> int:
    """Jobs in `status` (of `job_type`, if given) in the SQLite file, read on a read-only connection (WAL: never
    blocks the writer)."""
    of_type, params = ("AND jobType = ?", [job_type]) if job_type is not None else ("", [])
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        row = conn.execute(f"SELECT count(*) FROM jobs WHERE status = ? {of_type}", [status.value, *params]).fetchone()
    return int(row[0])


@contextmanager
def warmed_dev(path: Path) -> Iterator[Service]:
    """`jobsched dev` on the SQLite file at `path` once a warm-up job written beside the others has run: what is
    measured after this sees no start-up."""
    seed_sqlite(path, 1, lambda n: utc_now(), "warm-up")
    with running(lambda: Service("dev", {"JOBSCHED_DB": str(path), "API_PORT": str(free_port())})) as [dev]:

        def warmed_up() -> bool:
            dev.check_alive()
            return count_status(path, Status.COMPLETED) >= 1

        wait_until(warmed_up, 120, "the warm-up job to complete")
        yield dev


def last_completion(path: Path) -> float:
    """When the last job was completed (a wall-clock time, as time.time()): its row's updatedAt, the handler's
    end (its outcome's commit follows within a few ms)."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        row = conn.execute("SELECT max(updatedAt) FROM jobs WHERE status = ?", [Status.COMPLETED.value]).fetchone()
    return float(row[0]) / 1000


def measure_embedded(count: int, env: dict[str, str], time_box_s: float | None) -> Run:
    """The drain from the process start until `count` jobs are completed (or the time box ends), with the CPU
    per job (the machine's, and the process's) and the process's peak resident memory (`peak_rss_mb`, sampled
    at every progress poll). The polls are 0.2 s apart: a drain that completes every job ends at its last
    completion's time, as the store has it, not at the poll that saw it."""
    with tempfile.TemporaryDirectory(prefix="jobsched-embedded-") as folder:
        path = Path(folder) / "jobsched.db"
        now = utc_now()
        seed_sqlite(path, count, lambda n: now - timedelta(seconds=count - n), "embedded")
        started, started_at, cpu = time.monotonic(), time.time(), CpuWindow()
        dev_env = {"JOBSCHED_DB": str(path), "API_PORT": str(free_port()), **env}
        peak_rss = 0.0
        with running(lambda: Service("dev", dev_env)) as [dev]:

            def completed() -> int:
                nonlocal peak_rss
                dev.check_alive()
                peak_rss = max(peak_rss, process_rss_mb(dev.process.pid) or 0.0)
                return count_status(path, Status.COMPLETED)

            done, elapsed = count_until(completed, count, started, time_box_s)
            cpu_per_job = cpu.per_job(done, process_cpu_s(dev.process.pid))
        if done >= count:
            elapsed = last_completion(path) - started_at
    run = Run(setting_label(env), done, elapsed, cpu_per_job)
    run.extra["peak_rss_mb"] = round(peak_rss, 1)
    return run


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=20_000, help="due jobs to drain (default 20000)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    ours = measure_embedded(args.jobs, {}, None)
    reference = measure_embedded(args.jobs, REFERENCE_ENV, args.reference_seconds)
    return report("embedded", args, ours, reference, store="sqlite")


SCENARIO = Scenario("embedded", "due jobs drained by `jobsched dev` on SQLite (jobs/s)", add_arguments, run)
