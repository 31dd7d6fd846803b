"""`limits`: what a limited type costs the types without limits, in `jobsched dev` on SQLite.

Each run drains NOOP due noop jobs (no limits) while SLOW due `slow` jobs (sleepMs 20) wait beside them, both
written into the store before the process starts. Ours: `slow` under a concurrency limit of 5 and a start rate of
50 per second (an operator's, stored before the start); baseline, in the same run: no limits at all. Figure: the
noop jobs' drain (jobs/s from the process start until every noop job completed); the ratio must stay >= 0.9.
Runs alternate (--repeat), medians compared. Also printed: how many slow jobs ran meanwhile, and their peak
concurrency and busiest second as the attempt records show them (ours must stay within 5 and 50). A third run
each round adds a start rate per concurrency key (the slow jobs spread over KEYS keys, at most 1 start per second
each): the noop drain beside it, and each key's busiest second (must stay within 1)."""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

from jobsched.limits import Limits, Rate
from loadtest.benchkit import Scenario, envelope, ratio, seed_sqlite_jobs, target
from loadtest.procs import Service, count_until, free_port, running
from loadtest.scenarios.embedded import count_status
from shared.backends import open_backend, sqlite_url
from shared.model import Status, utc_now
from shared.store.base import NewJob

TARGET_RATIO = 0.9
SLOW_LIMITS = Limits(concurrency=5, rate=Rate(50, per=1.0))
KEYED_LIMITS = Limits(concurrency=5, rate=Rate(50, per=1.0), rate_per_key=Rate(1, per=1.0))
KEYS = 40


def seed(path: Path, noop: int, slow: int) -> None:
    due = utc_now() - timedelta(minutes=1)
    jobs = [NewJob(f"noop-{n}", f"tenant-{n % 4}", "noop", due) for n in range(noop)]
    jobs += [
        NewJob(f"slow-{n}", f"tenant-{n % 4}", "slow", due, payload={"sleepMs": 20}, concurrencyKey=f"key-{n % KEYS}")
        for n in range(slow)
    ]
    seed_sqlite_jobs(path, jobs)


def set_limits(path: Path, limits: Limits) -> None:
    backend = open_backend(sqlite_url(str(path)))
    try:
        backend.job_types.set_limits("slow", limits, utc_now())
    finally:
        backend.close()


def slow_attempts(path: Path) -> tuple[int, int, int]:
    """The slow jobs' attempts: the most that overlapped, the most that started within one second, and the most
    of one concurrency key that started within one second."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        spans = conn.execute(
            "SELECT e.startedAt, e.finishedAt, j.concurrencyKey FROM executions e JOIN jobs j ON j.id = e.jobId "
            "WHERE j.jobType = 'slow' AND e.finishedAt IS NOT NULL"
        ).fetchall()
    events = sorted([(int(s), 1) for s, _, _ in spans] + [(int(f), -1) for _, f, _ in spans])
    peak = running_now = 0
    for _, change in events:
        running_now += change
        peak = max(peak, running_now)
    by_key: dict[str, list[int]] = {}
    for s, _, key in spans:
        by_key.setdefault(str(key), []).append(int(s))
    busiest_key = max((busiest_second(starts) for starts in by_key.values()), default=0)
    return peak, busiest_second([int(s) for s, _, _ in spans]), busiest_key


def busiest_second(starts_ms: list[int]) -> int:
    """The most starts within any one second."""
    starts = sorted(starts_ms)
    busiest, first = 0, 0
    for last, moment in enumerate(starts):
        while moment - starts[first] >= 1000:
            first += 1
        busiest = max(busiest, last - first + 1)
    return busiest


def one_run(noop: int, slow: int, limits: Limits | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="jobsched-limits-") as folder:
        path = Path(folder) / "jobsched.db"
        seed(path, noop, slow)
        if limits is not None:
            set_limits(path, limits)
        started = time.monotonic()
        env = {"JOBSCHED_DB": str(path), "API_PORT": str(free_port())}
        with running(lambda: Service("dev", env)) as [dev]:

            def noop_done() -> int:
                dev.check_alive()
                return count_status(path, Status.COMPLETED, "noop")

            done, seconds = count_until(noop_done, noop, started, None)
            slow_done = count_status(path, Status.COMPLETED, "slow")
        peak, busiest, busiest_key = slow_attempts(path)
        left = count_status(path, Status.PENDING)
    return {
        "noop_jobs_per_s": round(done / seconds, 1),
        "slow_completed": slow_done,
        "slow_peak_concurrency": peak,
        "slow_busiest_second": busiest,
        "slow_busiest_key_second": busiest_key,
        "pending_left": left,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--noop", type=int, default=20_000, help="noop jobs to drain (default 20000)")
    parser.add_argument("--slow", type=int, default=2_000, help="slow jobs beside them (default 2000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, alternating (default 3)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    ours: list[dict[str, Any]] = []
    keyed: list[dict[str, Any]] = []
    baseline: list[dict[str, Any]] = []
    for _ in range(args.repeat):
        ours.append(one_run(args.noop, args.slow, SLOW_LIMITS))
        keyed.append(one_run(args.noop, args.slow, KEYED_LIMITS))
        baseline.append(one_run(args.noop, args.slow, None))
    for label, runs in (
        ("slow limited to 5 at once, 50/s", ours),
        ("... and 1/s per key", keyed),
        ("no limits", baseline),
    ):
        for figures in runs:
            print(
                f"{label:<34} noop {figures['noop_jobs_per_s']:>8} jobs/s; slow meanwhile: "
                f"{figures['slow_completed']} done, peak {figures['slow_peak_concurrency']} at once, "
                f"busiest second {figures['slow_busiest_second']} starts "
                f"({figures['slow_busiest_key_second']} of one key)"
            )
    ours_median = statistics.median(r["noop_jobs_per_s"] for r in ours)
    keyed_median = statistics.median(r["noop_jobs_per_s"] for r in keyed)
    base_median = statistics.median(r["noop_jobs_per_s"] for r in baseline)
    value = ratio(True, ours_median, base_median)
    keyed_value = ratio(True, keyed_median, base_median)
    within = all(r["slow_peak_concurrency"] <= 5 and r["slow_busiest_second"] <= 50 for r in ours + keyed)
    keys_within = all(r["slow_busiest_key_second"] <= 1 for r in keyed)
    met = value >= TARGET_RATIO and within
    print(f"noop drain medians: {ours_median} vs {base_median} jobs/s, ratio {value:.2f}x; limits kept: {within}")
    print(f"with a rate per key: {keyed_median} jobs/s, ratio {keyed_value:.2f}x; each key within 1/s: {keys_within}")
    targets = {
        "unlimited_drain": target(f"noop drain >= {TARGET_RATIO}x with slow limited, limits kept", value, met),
        "unlimited_drain_beside_key_rate": target(
            f"noop drain >= {TARGET_RATIO}x with slow limited per key too, each key kept",
            keyed_value,
            keyed_value >= TARGET_RATIO and keys_within,
        ),
    }
    return envelope(
        "limits",
        {
            "setting": "slow: concurrency 5, rate 50/s",
            "runs": ours,
            "noop_jobs_per_s": ours_median,
            "slow_peak_concurrency": max(r["slow_peak_concurrency"] for r in ours),
            "slow_busiest_second": max(r["slow_busiest_second"] for r in ours),
            "with_key_rate": {
                "runs": keyed,
                "noop_jobs_per_s": keyed_median,
                "slow_busiest_key_second": max(r["slow_busiest_key_second"] for r in keyed),
            },
        },
        {"setting": "no limits", "runs": baseline, "noop_jobs_per_s": base_median},
        value,
        "sqlite",
        targets=targets,
        machine_cores=os.cpu_count(),
    )


SCENARIO = Scenario("limits", "unlimited types' drain beside a type limited to 5 at once and 50/s", add_arguments, run)
