"""`scale`: what a client's and the console's reads cost in `jobsched dev` whose SQLite file holds JOBS jobs,
and what such a file costs the drain, against the same drain on an empty file in the same run.

The store is built through the public API: JOBS one-off noop jobs sent through POST /jobs/batch (the load's
jobs/s is reported), spread over TENANTS tenants and due over the next 30 days, plus a few templates. Then, with
the node stopped, all but PENDING_SHARE of them are moved to their ends in bulk (most completed, some dead-lettered
with one failed attempt each, some cancelled, finished over the last 6 days: inside the default retention): how
they got there does not change what a read costs. With the node started again, DUE jobs of their own tenant are
sent due now and drained (jobs/s, from the first send to the last completion); the same is done on an empty file,
DRAINS times each, alternating, and the medians are compared.
Last, at idle, each read a client or the console makes is sent REPEAT times in turn: p50/p99/max in ms. Also
reported: the file's size and the node's resident memory. Target (issue 31): every read's p99 <= 50 ms and the
drain >= 0.9x the empty file's.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Iterable
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx2 as httpx

from loadtest.benchkit import Scenario, envelope, ratio, target
from loadtest.cpu import process_rss_mb
from loadtest.procs import wait_until
from loadtest.scenarios.api import dev_node
from loadtest.scenarios.retention_soak import file_mb
from loadtest.stats import summary
from shared.model import format_time, utc_now

BATCH = 1000
DRAIN_TENANT = "drain"
TARGET_P99_MS = 50.0
TARGET_DRAIN_RATIO = 0.9


def tenant(n: int) -> str:
    return f"tenant-{n:03d}"


async def send_all(base_url: str, batches: Iterable[dict[str, Any]], clients: int = 4) -> tuple[float, int]:
    """Send the batches, `clients` at a time: seconds taken, and how many times a batch was sent again because
    the store was busy (503, whole or for some of its jobs: the idempotency keys make sending it again safe)."""
    pending = iter(batches)
    resent = 0
    async with httpx.AsyncClient(base_url=base_url, timeout=120) as client:

        async def worker() -> None:
            nonlocal resent
            for body in pending:
                while True:
                    response = await client.post("/jobs/batch", json=body)
                    if not _busy(response):
                        break
                    resent += 1
                    await asyncio.sleep(float(response.headers.get("Retry-After", "1")))
                if response.status_code != 200 or response.json()["refused"]:
                    raise RuntimeError(f"a batch failed: {response.status_code} {response.text[:300]}")

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        return time.perf_counter() - started, resent


def _busy(response: httpx.Response) -> bool:
    if response.status_code == 503:
        return True
    return response.status_code == 200 and any(r["status"] == 503 for r in response.json()["results"])


def build(base_url: str, jobs: int, tenants: int) -> dict[str, Any]:
    now = utc_now()
    run_id = uuid.uuid4().hex[:8]

    def job(n: int) -> dict[str, Any]:
        due = now + timedelta(days=1 + 29 * (n % 997) / 997, seconds=n % 86_400)
        return {
            "idempotencyKey": f"scale-{run_id}-{n}",
            "tenantId": tenant(n % tenants),
            "jobType": "noop",
            "scheduledAt": format_time(due),
            "payload": {"n": n},
        }

    batches = ({"jobs": [job(n) for n in range(start, min(start + BATCH, jobs))]} for start in range(0, jobs, BATCH))
    seconds, resent = asyncio.run(send_all(base_url, batches))
    templates = [
        {"idempotencyKey": f"scale-{run_id}-nightly-{t}", "tenantId": tenant(t), "jobType": "noop", "cron": "0 3 * * *"}
        for t in range(tenants)
    ]
    asyncio.run(send_all(base_url, [{"jobs": templates}]))
    return {"jobs": jobs, "seconds": round(seconds, 1), "jobs_per_s": round(jobs / seconds, 1), "resent": resent}


def finish_in_bulk(path: Path, pending_share: float) -> dict[str, int]:
    """All but `pending_share` of the one-off jobs moved to their ends, straight in the file (node stopped)."""
    now_ms = int(time.time() * 1000)
    six_days_ms = 6 * 86_400_000
    with closing(sqlite3.connect(path)) as conn:
        with conn:
            conn.execute(
                """UPDATE jobs SET
                       status = CASE WHEN (rowid / 100) % 20 = 0 THEN 'dlq'
                                     WHEN (rowid / 100) % 20 = 1 THEN 'cancelled' ELSE 'completed' END,
                       attempts = CASE WHEN (rowid / 100) % 20 = 0 THEN 1 ELSE 0 END,
                       lastError = CASE WHEN (rowid / 100) % 20 = 0
                                        THEN 'HandlerError: card declined ' || (rowid % 7) ELSE NULL END,
                       updatedAt = ? - (rowid * 7919) % ?
                   WHERE kind = 'run' AND (rowid / 100) % 100 >= ?""",
                (now_ms, six_days_ms, round(pending_share * 100)),
            )
            conn.execute(
                """INSERT INTO executions
                       (id, jobId, attempt, outcome, worker, startedAt, finishedAt, durationMs, error)
                   SELECT id || ':1', id, 1, 'failed', 'bench', updatedAt - 5, updatedAt, 5.0, lastError
                   FROM jobs WHERE status = 'dlq'"""
            )
        counts = dict(conn.execute("SELECT status, count(*) FROM jobs GROUP BY status").fetchall())
    return {str(k): int(v) for k, v in counts.items()}


def drain(base_url: str, path: Path, due: int) -> dict[str, Any]:
    """`due` jobs due now sent in batches; jobs/s from the first send until the last one completed."""
    run_id = uuid.uuid4().hex[:8]
    drainer = f"{DRAIN_TENANT}-{run_id}"  # a tenant of its own: a file measured again holds earlier drains' jobs
    started = time.perf_counter()
    batches = [
        {
            "tenantId": drainer,
            "jobs": [
                {"idempotencyKey": f"drain-{run_id}-{n}", "jobType": "noop", "scheduledAt": format_time(utc_now())}
                for n in range(start, min(start + BATCH, due))
            ],
        }
        for start in range(0, due, BATCH)
    ]
    asyncio.run(send_all(base_url, batches, clients=1))

    def completed() -> int:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            sql = "SELECT count(*) FROM jobs WHERE tenantId = ? AND status = 'completed'"
            return int(conn.execute(sql, (drainer,)).fetchone()[0])

    wait_until(lambda: completed() >= due, 600, f"{due} due jobs to complete", interval_s=0.05)
    seconds = time.perf_counter() - started
    return {"jobs": due, "seconds": round(seconds, 2), "jobs_per_s": round(due / seconds, 1)}


def reads(base_url: str, repeat: int) -> dict[str, Any]:
    """Each read of a client or the console, `repeat` times: latency summary by name."""
    sample = tenant(7)
    with httpx.Client(base_url=base_url, timeout=60) as client:
        page = client.get("/jobs", params={"tenantId": sample, "limit": "100"}).json()
        job_id = page[-1]["id"]
        template = client.get("/jobs", params={"tenantId": sample, "kind": "template"}).json()[0]["id"]
        dead = client.get("/jobs", params={"tenantId": sample, "status": "dlq", "limit": "1"}).json()
        dead_id = dead[0]["id"] if dead else job_id
        paths: dict[str, tuple[str, dict[str, str]]] = {
            "get": (f"/jobs/{job_id}", {}),
            "executions": (f"/jobs/{dead_id}/executions", {}),
            "list": ("/jobs", {"tenantId": sample}),
            "list pending": ("/jobs", {"tenantId": sample, "status": "pending"}),
            "list completed": ("/jobs", {"tenantId": sample, "status": "completed"}),
            "list dlq": ("/jobs", {"tenantId": sample, "status": "dlq"}),
            "list cancelled": ("/jobs", {"tenantId": sample, "status": "cancelled"}),
            "list by type": ("/jobs", {"tenantId": sample, "jobType": "noop"}),
            "list page 2": ("/jobs", {"tenantId": sample, "before": f"{page[-1]['createdAt']}_{page[-1]['id']}"}),
            "templates": ("/jobs", {"tenantId": sample, "kind": "template"}),
            "template runs": (f"/jobs/{template}/runs", {}),
            "dlq": ("/dlq", {"tenantId": sample}),
            "overview": ("/overview", {"tenantId": sample}),
            "overview, every tenant": ("/overview", {}),
            "job types": ("/job-types", {}),
        }
        timings: dict[str, list[float]] = {name: [] for name in paths}
        for _ in range(repeat):
            for name, (path, params) in paths.items():
                started = time.perf_counter()
                response = client.get(path, params=params)
                timings[name].append((time.perf_counter() - started) * 1000)
                if response.status_code != 200:
                    raise RuntimeError(f"{name}: {response.status_code} {response.text[:300]}")
    return {name: summary(values) for name, values in timings.items()}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=1_000_000, help="jobs in the store (default 1,000,000)")
    parser.add_argument("--pending-share", type=float, default=0.1, help="share left pending (default 0.1)")
    parser.add_argument("--tenants", type=int, default=100, help="tenants (default 100)")
    parser.add_argument("--due", type=int, default=20_000, help="due jobs drained (default 20,000)")
    parser.add_argument("--repeat", type=int, default=50, help="times each read is sent (default 50)")
    parser.add_argument("--drains", type=int, default=3, help="drains on each file, alternating (default 3)")
    parser.add_argument(
        "--file",
        type=Path,
        help="build the store in this file and keep it; if it exists, measure on it as it is (no build)",
    )


def _median(drains: list[dict[str, Any]]) -> dict[str, Any]:
    return sorted(drains, key=lambda d: float(d["jobs_per_s"]))[len(drains) // 2]


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="jobsched-scale-") as folder:
        path = args.file or Path(folder) / "large.db"
        if args.file is not None and args.file.exists():
            with closing(sqlite3.connect(path)) as conn:
                statuses = {str(k): int(v) for k, v in conn.execute("SELECT status, count(*) FROM jobs GROUP BY 1")}
            loaded: dict[str, Any] = {"jobs": sum(statuses.values()), "seconds": 0.0, "jobs_per_s": 0.0, "resent": 0}
        else:
            with dev_node(path) as (base_url, _):
                loaded = build(base_url, args.jobs, args.tenants)
            statuses = finish_in_bulk(path, args.pending_share)
        # A drain of seconds varies by a tenth from one run to the next (checkpoints, the machine): the drains
        # alternate between the two files and the medians are compared.
        larges, empties = [], []
        empty_path = Path(folder) / "empty.db"
        for turn in range(args.drains):
            with dev_node(path) as (base_url, dev):
                larges.append(drain(base_url, path, args.due))
                if turn == 0:
                    latency = reads(base_url, args.repeat)
                    rss = process_rss_mb(dev.process.pid)
            with dev_node(empty_path) as (base_url, _):
                empties.append(drain(base_url, empty_path, args.due))
        size = file_mb(path)
    large, empty = _median(larges), _median(empties)
    drain_ratio = ratio(True, large["jobs_per_s"], empty["jobs_per_s"])
    print(
        f"store: {args.jobs} jobs loaded in {loaded['seconds']} s ({loaded['jobs_per_s']} jobs/s; batches sent again"
        f" while the store was busy: {loaded['resent']}), then {statuses}"
    )
    print(f"file {size} MB, node RSS {rss:.0f} MB")
    for name, figures in latency.items():
        print(f"  {name:<24} p50 {figures['p50']:8.2f}  p99 {figures['p99']:8.2f}  max {figures['max']:8.2f} ms")
    print(
        f"drain of {args.due}, median of {args.drains} alternating: {large['jobs_per_s']} jobs/s on the large file"
        f" ({', '.join(str(d['jobs_per_s']) for d in larges)}), {empty['jobs_per_s']} on an empty one"
        f" ({', '.join(str(d['jobs_per_s']) for d in empties)}); ratio {drain_ratio:.2f},"
        f" target >= {TARGET_DRAIN_RATIO}"
    )
    worst = max(f["p99"] for f in latency.values())
    targets = {
        "reads_p99_le_50ms": target(f"every read's p99 <= {TARGET_P99_MS:g} ms", worst, worst <= TARGET_P99_MS),
        "drain_ge_0_9x_empty": target(
            "drain >= 0.9x the empty store's", drain_ratio, drain_ratio >= TARGET_DRAIN_RATIO
        ),
    }
    ours = {
        "load": loaded,
        "statuses": statuses,
        "reads_ms": latency,
        "drain": large,
        "drains": larges,
        "file_mb": size,
        "rss_mb": rss,
    }
    return envelope(
        "scale", ours, {"drain": empty, "drains": empties}, drain_ratio, "sqlite", targets=targets, jobs=args.jobs
    )


SCENARIO = Scenario(
    "scale", "client and console reads and the drain on a store of millions of jobs", add_arguments, run
)
