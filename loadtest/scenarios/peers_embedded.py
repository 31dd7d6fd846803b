"""`peers-embedded`: the embedded drain against what a Python team would run on one machine instead: two peers,
measured in the same run after jobsched, each running inside this process.

- jobsched: N due noop jobs drained by `jobsched dev` on its SQLite file (WAL, synchronous=FULL), timed from
  the process start until every job is completed (the `embedded` measurement), with the process's CPU per job
  and peak memory. What it writes per job: the job's row goes pending → running → completed and keeps its
  attempt record (start, end, outcome) and history; the writes of the threads are group-committed, one WAL
  sync per transaction for whatever they asked meanwhile (many jobs a sync); a claim's transaction alone is not
  synced by its own commit (the start of its jobs, a synced commit after it, makes it durable).
- APScheduler 3: its SQLAlchemyJobStore on a SQLite file in WAL mode (synchronous=FULL as well), N date-trigger
  jobs due now persisted before the run, the default ThreadPoolExecutor (10 workers), timed from `resume()`
  until every job has run (as in `peer`). Per job it deletes the job's row once it has handed the job to a
  thread (a transaction, a WAL sync, each), and keeps no record of the run.
- Huey: a SqliteHuey on a file in WAL mode with `fsync=True` (synchronous=FULL; Huey's default leaves SQLite's
  own, FULL in most builds), N no-op tasks enqueued before the run (an insert and a sync each, timed apart), a
  consumer with 10 worker threads started in this process, timed from its start until every task has run
  (counted in the task, awaited on an event). Per task a worker deletes the task's row when it dequeues it,
  before running it (a transaction, a WAL sync), and keeps no record: a no-op returns None, which Huey does
  not store as a result (its empty revocation check after the run writes nothing).

CPU per job for each: the machine's and its own process's (the peers run in this process, which meanwhile only
waits). jobsched is timed from its process's spawn, so its start-up (imports, schema check, election: some 0.4 s)
counts against it; the peers from their consumer's start, imported and enqueued already. Each is timed to its
last run: jobsched's last completion as its store has it, the peers' last run as counted in the task.
`ratio` is jobsched's jobs/s over the faster peer's; `ratios` gives each (jobsched / peer). Targets (issue 52):
jobsched's drain >= 1.2x Huey's and >= 1.4x APScheduler's in the same run, its own CPU per job <= 0.25 ms, peak
RSS < 100 MB."""

from __future__ import annotations

import argparse
import signal
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

import apscheduler
import huey
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from sqlalchemy import create_engine, event

from loadtest.benchkit import Run, Scenario, envelope, print_run, ratio, target
from loadtest.cpu import InProcessCpuWindow
from loadtest.scenarios.embedded import measure_embedded
from loadtest.scenarios.peer import RunCounter, run_apscheduler

TARGET_VS_HUEY = 1.2
TARGET_VS_APSCHEDULER = 1.4
TARGET_CPU_MS_PER_JOB = 0.25
TARGET_PEAK_RSS_MB = 100.0
HUEY_WORKERS = 10
# The signals a Huey consumer's start() takes over for its own main loop, which this process does not run.
CONSUMER_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


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


def measure_huey_sqlite(count: int, time_box_s: float) -> tuple[Run, dict[str, float]]:
    """`count` no-op tasks enqueued on a SqliteHuey (WAL, synchronous=FULL), run by a consumer of HUEY_WORKERS
    threads in this process: the run, and the seconds Huey took to enqueue the tasks before it."""
    with tempfile.TemporaryDirectory(prefix="huey-sqlite-") as folder:
        queue = huey.SqliteHuey("peer", filename=str(Path(folder) / "huey.db"), journal_mode="wal", fsync=True)
        ran = RunCounter(count)
        noop = queue.task(name="noop")(ran.increment)  # calling it enqueues a task that counts a run
        try:
            enqueueing = time.monotonic()
            for _ in range(count):
                noop()
            enqueued_s = time.monotonic() - enqueueing
            consumer = queue.create_consumer(workers=HUEY_WORKERS, worker_type="thread")
            handlers = {signum: signal.getsignal(signum) for signum in CONSUMER_SIGNALS}
            try:
                started, cpu = time.monotonic(), InProcessCpuWindow()
                consumer.start()
                restore_handlers(handlers)  # Ctrl-C stays this process's (the consumer's loop would read it)
                ran.reached.wait(time_box_s)
                elapsed = time.monotonic() - started
                done = ran.value
                cpu_per_job = cpu.per_job(done)
            finally:
                consumer.stop(graceful=True)  # sets the workers' stop flag and joins them and the scheduler
                restore_handlers(handlers)
        finally:
            queue.storage.close()
    label = f"Huey {huey.__version__}: SqliteHuey (WAL, synchronous=FULL), {HUEY_WORKERS} threads"
    return Run(label, done, elapsed, cpu_per_job), {"enqueue_seconds": round(enqueued_s, 2)}


def restore_handlers(handlers: dict[int, Any]) -> None:
    for signum, handler in handlers.items():
        if handler is not None:  # None: set outside Python, which signal.signal cannot put back
            signal.signal(signum, handler)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=20_000, help="due jobs (default 20000)")
    parser.add_argument(
        "--peer-seconds", type=float, default=600.0, help="time box of each peer's run, APScheduler's and Huey's"
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    ours = measure_embedded(args.jobs, {}, None)
    aps_run, aps_times = measure_apscheduler_sqlite(args.jobs, args.peer_seconds)
    huey_run, huey_times = measure_huey_sqlite(args.jobs, args.peer_seconds)
    for side in (ours, huey_run, aps_run):
        print_run(side)
    ratios = {"huey": ratio(True, ours.rate, huey_run.rate), "apscheduler": ratio(True, ours.rate, aps_run.rate)}
    print(f"ratio (jobsched / Huey): {ratios['huey']:.2f}x, (jobsched / APScheduler): {ratios['apscheduler']:.2f}x")
    print(
        f"(before the run, Huey enqueued the {args.jobs} tasks in {huey_times['enqueue_seconds']}s and APScheduler "
        f"persisted its jobs in {aps_times['persist_seconds']}s; APScheduler's store was empty "
        f"{aps_times['store_empty_seconds']}s after its start)"
    )
    cpu_ms = ours.cpu_ms_per_job.get("own_processes", float("nan"))
    rss_mb = ours.extra["peak_rss_mb"]
    targets = {
        "drain_vs_huey": target(
            f"jobs/s >= {TARGET_VS_HUEY:g}x Huey's in the same run", ratios["huey"], ratios["huey"] >= TARGET_VS_HUEY
        ),
        "drain_vs_apscheduler": target(
            f"jobs/s >= {TARGET_VS_APSCHEDULER:g}x APScheduler's in the same run",
            ratios["apscheduler"],
            ratios["apscheduler"] >= TARGET_VS_APSCHEDULER,
        ),
        "cpu_ms_per_job": target(
            f"own CPU per job <= {TARGET_CPU_MS_PER_JOB} ms", cpu_ms, cpu_ms <= TARGET_CPU_MS_PER_JOB
        ),
        "peak_rss_mb": target(f"peak RSS < {TARGET_PEAK_RSS_MB:g} MB", rss_mb, rss_mb < TARGET_PEAK_RSS_MB),
    }
    for name, figure in targets.items():
        print(f"target {name}: {figure['target']}: {figure['value']} {'met' if figure['met'] else 'MISSED'}")
    return envelope(
        "peers-embedded",
        ours.figures(),
        {"huey": {**huey_run.figures(), **huey_times}, "apscheduler": {**aps_run.figures(), **aps_times}},
        ratio(True, ours.rate, max(huey_run.rate, aps_run.rate)),
        "sqlite",
        backlog=args.jobs,
        ratios=ratios,
        targets=targets,
    )


SCENARIO = Scenario(
    "peers-embedded",
    "`jobsched dev` drain vs Huey and APScheduler 3 on SQLite (WAL), with CPU per job",
    add_arguments,
    run,
)
