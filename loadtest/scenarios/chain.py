"""`chain`: LENGTH noop jobs, each waiting for the one before it (dependsOn), run by `jobsched dev`: how long from a
parent's end to its child's start (p50/p95/max ms), and the whole chain's time. The chain is written into the
SQLite file before the process starts, its first job parked a day ahead; once a warm-up job has run, that job is
moved to due now, so the measurement sees only the chain. A link's time is the child's first attempt's start (the
store's, as its record has it) minus the parent's attempt's end (the handler's, a few ms before its commit).
Peer: a Celery 5 `chain` of LENGTH tasks on Redis, each passing its end time on to the next, which records its
own start minus it. Target (issue 50): p50 <= 20 ms."""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from contextlib import closing
from datetime import timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import celery

from loadtest import celery_app
from loadtest.benchkit import Figures, Scenario, envelope, ratio, target
from loadtest.celery_peer import add_celery_arguments, label, warmed_celery
from loadtest.procs import count_until
from loadtest.scenarios.embedded import count_status, warmed_dev
from loadtest.stats import summary
from shared.backends import open_backend, sqlite_url
from shared.model import Status, utc_now
from shared.store.base import NewJob
from shared.store.sqlite.codecs import from_ms, to_ms

KEY_PREFIX = "link"
PARKED_FOR = timedelta(days=1)
P50_GOAL_MS = 20.0


def write_chain(path: Path, length: int) -> list[str]:
    """The chain's jobs, first to last, each created waiting for the one before; the first parked ahead."""
    store = open_backend(sqlite_url(str(path.resolve())), durable=False).jobs
    try:
        store.ensure_schema()
        ids: list[str] = []
        for n in range(length):
            job = store.create(
                NewJob(
                    idempotencyKey=f"{KEY_PREFIX}-{n}",
                    tenantId="tenant-a",
                    jobType="noop",
                    scheduledAt=utc_now() + PARKED_FOR if n == 0 else utc_now(),
                    dependsOn=ids[-1:] or None,
                )
            )
            ids.append(job.id)
        return ids
    finally:
        store.close()


def link_times(path: Path, ids: list[str]) -> tuple[list[float], float]:
    """Each link's ms from the parent's end to the child's start, and the seconds from the first start to the
    last end."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        rows = {
            job_id: (from_ms(started), from_ms(finished))
            for job_id, started, finished in conn.execute(
                "SELECT jobId, startedAt, finishedAt FROM executions WHERE attempt = 1 AND finishedAt IS NOT NULL"
            )
        }
    links = [
        (rows[child][0] - rows[parent][1]).total_seconds() * 1000
        for parent, child in pairwise(ids)
        if parent in rows and child in rows
    ]
    whole = (rows[ids[-1]][1] - rows[ids[0]][0]).total_seconds() if ids[0] in rows and ids[-1] in rows else 0.0
    return links, whole


def measure_embedded_chain(length: int, time_box_s: float) -> Figures:
    with tempfile.TemporaryDirectory(prefix="jobsched-chain-") as folder:
        path = Path(folder) / "jobsched.db"
        ids = write_chain(path, length)
        with warmed_dev(path) as dev:
            with closing(sqlite3.connect(path, timeout=30, isolation_level=None)) as conn:
                conn.execute("UPDATE jobs SET scheduledAt = ? WHERE id = ?", (to_ms(utc_now()), ids[0]))
            end = time.monotonic() + time_box_s
            while count_status(path, Status.COMPLETED) < length + 1 and time.monotonic() < end:
                dev.check_alive()
                time.sleep(0.05)
        links, whole = link_times(path, ids)
    return {"setting": "defaults", "length": length, "links": len(links), "link_ms": summary(links), "chain_s": whole}


def measure_celery_chain(length: int, pool: str, concurrency: int, time_box_s: float) -> Figures:
    with warmed_celery(pool, concurrency) as (app, reports):
        celery.chain(*[app.signature("peer.link") for _ in range(length)]).apply_async()
        count_until(lambda: int(reports.get(celery_app.RUNS_KEY) or 0), length + 1, time.monotonic(), time_box_s)
        delays = [float(v) for v in reports.lrange(celery_app.DELAYS_KEY, 0, -1)]
        spans = [[float(t) for t in v.split()] for v in reports.lrange(celery_app.SPANS_KEY, 0, -1)]
    whole = max(end for _, end in spans) - min(start for start, _ in spans) if spans else 0.0
    return {
        "setting": label(pool, concurrency) + ", celery.chain",
        "length": length,
        "links": len(delays),
        "link_ms": summary(delays),
        "chain_s": round(whole, 3),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--length", type=int, default=100, help="jobs in the chain (default 100)")
    parser.add_argument("--time-box", type=float, default=120.0, help="seconds allowed for each chain (default 120)")
    add_celery_arguments(parser)


def run(args: argparse.Namespace) -> dict[str, Any]:
    ours = measure_embedded_chain(args.length, args.time_box)
    peer = measure_celery_chain(args.length, args.pool, args.concurrency, args.time_box)
    value = ratio(False, ours["link_ms"]["p50"], peer["link_ms"]["p50"])
    for name, figures in (("jobsched dev", ours), (peer["setting"], peer)):
        q = figures["link_ms"]
        print(
            f"{name:<80} parent end → child start p50 {q['p50']:6.1f} p95 {q['p95']:6.1f} max {q['max']:6.1f} ms; "
            f"{figures['links']} links, the chain in {figures['chain_s']:.2f} s"
        )
    met = ours["links"] == args.length - 1 and ours["link_ms"]["p50"] <= P50_GOAL_MS
    print(f"ratio (Celery p50 / jobsched p50): {value:.2f}x; target p50 <= {P50_GOAL_MS:g} ms, every link ran: {met}")
    targets = {"link": target(f"p50 <= {P50_GOAL_MS:g} ms over a chain of {args.length}", ours["link_ms"]["p50"], met)}
    return envelope("chain", ours, peer, value, "sqlite", targets=targets)


SCENARIO = Scenario(
    "chain", "a chain of jobs in `jobsched dev`: parent end → child start vs a Celery chain", add_arguments, run
)
