"""`lateness-embedded`: RATE x WINDOW jobs scheduled ahead, due at a steady RATE per second over WINDOW seconds,
run by `jobsched dev`. The jobs are written into its SQLite file before the process starts, due a day later;
once a warm-up job has run, one update moves them all to start LEAD_S from then (so no second process writes to
the file while they run, and none is due before the measurement). Lateness = the first attempt's startedAt -
scheduledAt, read from the file afterwards; a job not started by the end (WINDOW + SETTLE) counts with its
lateness so far. Peer: Celery 5 tasks sent with `apply_async(eta=...)` at the same rate (start - eta). Targets
at 200 jobs/s: p99 <= 10 ms, max <= 100 ms, every job started; at 1,000 jobs/s: p99 <= 50 ms."""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from contextlib import closing
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from loadtest.benchkit import Figures, Scenario, envelope, ratio, seed_sqlite, target
from loadtest.celery_peer import add_celery_arguments, measure_celery_timed
from loadtest.scenarios.embedded import count_status, warmed_dev
from loadtest.scenarios.lateness import lateness_figures, lateness_ms
from shared.model import Status, utc_now
from shared.store.sqlite.codecs import from_ms

KEY_PREFIX = "late"
LEAD_S = 2.0  # from the move to the first due job
PARKED_FOR = timedelta(days=1)  # where the jobs wait, beyond any claim, until the measurement starts


def move_to(path: Path, first_due: datetime, parked: datetime) -> None:
    """Move the parked jobs (due from `parked` on) so that the first is due at `first_due`, in one transaction."""
    shift_ms = round((parked - first_due).total_seconds() * 1000)
    with closing(sqlite3.connect(path, timeout=30, isolation_level=None)) as conn:
        conn.execute(
            "UPDATE jobs SET scheduledAt = scheduledAt - ? WHERE idempotencyKey LIKE ? AND status = ?",
            (shift_ms, f"{KEY_PREFIX}-%", Status.PENDING.value),
        )


def read_times(path: Path) -> tuple[dict[str, datetime], dict[str, datetime]]:
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        scheduled = {
            job_id: from_ms(at)
            for job_id, at in conn.execute(
                "SELECT id, scheduledAt FROM jobs WHERE idempotencyKey LIKE ?", (f"{KEY_PREFIX}-%",)
            )
        }
        started = {  # the first attempt's start: its record once it ended, its job's fields while it runs
            job_id: from_ms(at)
            for job_id, at in conn.execute(
                "SELECT jobId, startedAt FROM executions WHERE attempt = 1 AND startedAt IS NOT NULL "
                "UNION ALL SELECT id, claimedAt FROM jobs "
                "WHERE attempts = 0 AND status IN ('claimed', 'running') AND claimedAt IS NOT NULL"
            )
        }
    return scheduled, started


def measure_embedded_lateness(rate: float, window_s: float, settle_s: float) -> Figures:
    total = int(rate * window_s)
    parked = utc_now() + PARKED_FOR
    with tempfile.TemporaryDirectory(prefix="jobsched-lateness-") as folder:
        path = Path(folder) / "jobsched.db"
        seed_sqlite(path, total, lambda n: parked + timedelta(seconds=n / rate), KEY_PREFIX)
        with warmed_dev(path) as dev:
            move_to(path, utc_now() + timedelta(seconds=LEAD_S), parked)
            end = time.monotonic() + LEAD_S + window_s + settle_s
            while count_status(path, Status.COMPLETED) < total + 1 and time.monotonic() < end:
                dev.check_alive()
                time.sleep(0.2)
            ended = utc_now()
        scheduled, started = read_times(path)
    values, censored = lateness_ms(scheduled, started, ended)
    return {**lateness_figures(rate, window_s, total, values, censored), "setting": "defaults"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rate", type=float, default=200.0, help="jobs due per second (default 200)")
    parser.add_argument("--window", type=float, default=60.0, help="seconds over which jobs fall due (default 60)")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds allowed after the window (default 10)")
    add_celery_arguments(parser)


def run(args: argparse.Namespace) -> dict[str, Any]:
    ours = measure_embedded_lateness(args.rate, args.window, args.settle)
    peer = measure_celery_timed(args.rate, args.window, args.settle, args.pool, args.concurrency, ahead=True)
    late, peer_late = ours["lateness_ms"], peer["lateness_ms"]
    value = ratio(False, late["p99"], peer_late["p99"])
    p99_goal, max_goal = (10.0, 100.0) if args.rate <= 200 else (50.0, None)
    met = late["p99"] <= p99_goal and (max_goal is None or late["max"] <= max_goal) and ours["censored"] == 0
    goal = f"p99 <= {p99_goal:g} ms" + (f", max <= {max_goal:g} ms" if max_goal else "") + ", every job started"
    for name, figures in (("jobsched dev", ours), (peer["setting"], peer)):
        q = figures["lateness_ms"]
        print(
            f"{name:<80} lateness p50 {q['p50']:7.1f} p95 {q['p95']:7.1f} p99 {q['p99']:7.1f} max {q['max']:7.1f} ms "
            f"({figures['censored']} not started)"
        )
    print(f"ratio (Celery p99 / jobsched p99): {value:.2f}x; target {goal} at {args.rate:g} jobs/s: {met}")
    targets = {"lateness": target(f"{goal} at {args.rate:g} jobs/s", late["p99"], met)}
    return envelope("lateness-embedded", ours, peer, value, "sqlite", targets=targets)


SCENARIO = Scenario(
    "lateness-embedded", "start lateness in `jobsched dev` at a steady rate vs Celery eta tasks", add_arguments, run
)
