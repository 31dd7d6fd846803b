"""`peer`: the drain scenario against APScheduler 3.x as the peer baseline. jobsched: N due noop jobs from
pending to completed through a scheduler and a noop executor (the `drain` measurement). APScheduler: a
BackgroundScheduler with a MongoDBJobStore on the same FerretDB (a database unique to the run), N date-trigger
jobs due now added and persisted (`start(paused=True)`), the default ThreadPoolExecutor (10 workers), a no-op
function counting its runs; timed from `resume()` until every job has run. misfire_grace_time=None, since
with the default (1 s) APScheduler skips every job it reaches more than a second late instead of running it.
Both sides also report CPU per job: the machine's (store and broker included) and their own processes'
(jobsched's scheduler and executor from their start; APScheduler's, which runs in this process, from
`resume()` until its store is empty)."""

from __future__ import annotations

import argparse
import logging
import threading
import time
from datetime import UTC, datetime
from typing import Any

import apscheduler
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.base import BaseJobStore
from apscheduler.jobstores.mongodb import MongoDBJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from pymongo import MongoClient

from loadtest.benchkit import Run, Scenario, drop_database, report, server_setting, unique_name
from loadtest.cpu import InProcessCpuWindow
from loadtest.procs import count_until
from loadtest.scenarios.drain import measure_drain


class RunCounter:
    """A peer's runs, counted from any of its threads; `reached` is set once `target` of them have run, so a
    waiter wakes once rather than at every run."""

    def __init__(self, target: int = 0) -> None:
        self._lock = threading.Lock()
        self.value = 0
        self.target = target
        self.reached = threading.Event()

    def reset(self, target: int) -> None:
        with self._lock:
            self.value, self.target = 0, target
            self.reached.clear()

    def increment(self) -> None:
        with self._lock:
            self.value += 1
            if self.value == self.target:
                self.reached.set()


RAN = RunCounter()


def noop() -> None:
    """The peer's job (APScheduler stores it by reference, `loadtest.scenarios.peer:noop`)."""
    RAN.increment()


def measure_apscheduler(uri: str, count: int, time_box_s: float) -> tuple[Run, dict[str, float]]:
    """APScheduler on a MongoDBJobStore in a database of its own on the server at `uri`."""
    database = unique_name("peer")
    client: MongoClient[dict[str, Any]] = MongoClient(uri)  # closed by the job store's shutdown
    try:
        return run_apscheduler(
            MongoDBJobStore(database=database, client=client),
            f"APScheduler {apscheduler.__version__}: MongoDBJobStore, ThreadPoolExecutor(10)",
            count,
            time_box_s,
        )
    finally:
        drop_database(uri, database)


def run_apscheduler(jobstore: BaseJobStore, label: str, count: int, time_box_s: float) -> tuple[Run, dict[str, float]]:
    """`count` date-trigger jobs due now on `jobstore`, run by a BackgroundScheduler with the default
    ThreadPoolExecutor (10 workers): the run, and two times not part of it: the seconds APScheduler took to
    persist the jobs before, and from the start until its store was empty."""
    scheduler = BackgroundScheduler(
        jobstores={"default": jobstore},
        executors={"default": ThreadPoolExecutor()},
        job_defaults={"misfire_grace_time": None},
        timezone=UTC,
    )
    RAN.reset(count)
    now = datetime.now(UTC)
    try:
        for n in range(count):
            scheduler.add_job(noop, "date", run_date=now, id=f"peer-{n}")
        persisting = time.monotonic()
        scheduler.start(paused=True)
        persisted_s = time.monotonic() - persisting
        started, cpu = time.monotonic(), InProcessCpuWindow()
        scheduler.resume()
        RAN.reached.wait(time_box_s)  # set by the count'th run: the end is exact, not a poll's
        elapsed, done = time.monotonic() - started, RAN.value
        # Jobs run while the scheduler's loop is still deleting the ones it submitted: let it finish (timed
        # apart) rather than close the store under it.
        _, emptied_s = count_until(lambda: count - len(scheduler.get_jobs()), count, started, time_box_s)
        cpu_per_job = cpu.per_job(done)  # APScheduler runs in this process (this loop mostly sleeps)
    finally:
        if scheduler.running:
            # APScheduler 3.x wakes its loop after closing the store on shutdown, which then logs one "Error
            # getting due jobs ...": expected, so not shown.
            quiet = logging.getLogger("apscheduler.scheduler")
            level, quiet.level = quiet.level, logging.CRITICAL
            try:
                scheduler.shutdown(wait=True)
            finally:
                quiet.setLevel(level)
    return Run(label, done, elapsed, cpu_per_job), {
        "persist_seconds": round(persisted_s, 2),
        "store_empty_seconds": round(emptied_s, 2),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=20_000, help="due jobs (default 20000)")
    parser.add_argument("--batch", type=int, default=500, help="jobsched claim batch (default 500)")
    parser.add_argument("--peer-seconds", type=float, default=600.0, help="time box of the APScheduler run")


def run(args: argparse.Namespace) -> dict[str, Any]:
    uri, brokers = server_setting("MONGO_URI"), server_setting("KAFKA_BROKERS")
    ours = measure_drain(uri, brokers, args.jobs, {"CLAIM_BATCH": str(args.batch)}, None)
    peer, times = measure_apscheduler(uri, args.jobs, args.peer_seconds)
    print(
        f"(APScheduler persisted the {args.jobs} jobs in {times['persist_seconds']}s before the run; its store was "
        f"empty {times['store_empty_seconds']}s after the start)"
    )
    result = report("peer", args, ours, peer)
    result["baseline"].update(times)
    result["peer_store"] = "apscheduler MongoDBJobStore on the same server"
    return result


SCENARIO = Scenario("peer", "drain throughput vs APScheduler 3.x on the same FerretDB (jobs/s)", add_arguments, run)
