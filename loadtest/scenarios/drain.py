"""`drain`: N due noop jobs from pending to completed through real processes (a scheduler and a noop
executor): jobs/s as configured vs the reference setting (batch 20, tick 500 ms, one handler at a time), the
reference time-boxed."""

from __future__ import annotations

import argparse
from typing import Any

from loadtest.benchkit import REFERENCE_ENV, Run, Scenario, report, scratch_database, seed_due_jobs, server_setting
from loadtest.procs import run_pipeline


def measure_drain(uri: str, brokers: str, count: int, env: dict[str, str], time_box_s: float | None) -> Run:
    """Seed `count` due noop jobs, start a scheduler and a noop executor as processes, time until all are
    completed (or the time box ends)."""
    with scratch_database(uri) as database:
        seed_due_jobs(uri, database, count)
        return run_pipeline(uri, brokers, database, count, env, time_box_s)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=20_000, help="backlog size (default 20000)")
    parser.add_argument("--batch", type=int, default=500, help="jobsched claim batch (default 500)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    uri, brokers = server_setting("MONGO_URI"), server_setting("KAFKA_BROKERS")
    ours = measure_drain(uri, brokers, args.jobs, {"CLAIM_BATCH": str(args.batch)}, None)
    reference = measure_drain(uri, brokers, args.jobs, REFERENCE_ENV, args.reference_seconds)
    return report("drain", args, ours, reference)


SCENARIO = Scenario("drain", "due jobs pending → completed through real processes (jobs/s)", add_arguments, run)
