"""`retention-soak`: the SQLite file of `jobsched dev` under a steady load, with retention on and off.

Each run starts `python -m services.dev` on a fresh file and sends RATE due noop jobs a second (batches through
POST /jobs/batch, ten a second) for DURATION seconds; the executors run them as they come. The file's size
(database + WAL) is sampled every SAMPLE seconds. With retention (RETAIN_COMPLETED=KEEP, the reaper every
REAPER seconds) the completed jobs older than KEEP are deleted and their pages reused: the file levels off once
the first ones age out. The baseline keeps everything (RETAIN_COMPLETED=forever) and grows with the load.
Reported: the size series, and the growth over the last half of each run (target: <= 10% with retention).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx2 as httpx

from loadtest.benchkit import Scenario, envelope, ratio, target
from loadtest.scenarios.api import dev_node
from loadtest.scenarios.embedded import count_status
from shared.model import Status, format_time, utc_now

TARGET_GROWTH = 0.10
TENANT = "soak"


def file_mb(path: Path) -> float:
    sizes = [p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists()]
    return round(sum(sizes) / 1e6, 2)


async def steady_load(base_url: str, rate: int, duration_s: float, path: Path, sample_s: float) -> list[list[float]]:
    """Send `rate` jobs/s for `duration_s`; sample (seconds, file MB, completed) every `sample_s`."""
    run_id = uuid.uuid4().hex[:8]
    numbers = itertools.count()
    per_send = max(1, rate // 10)
    samples: list[list[float]] = []
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        started = time.monotonic()
        next_sample = 0.0
        for tick in itertools.count():
            elapsed = time.monotonic() - started
            if elapsed >= duration_s:
                break
            if elapsed >= next_sample:
                samples.append([round(elapsed, 1), file_mb(path), count_status(path, Status.COMPLETED)])
                next_sample += sample_s
            due = format_time(utc_now())
            jobs = [
                {"idempotencyKey": f"soak-{run_id}-{next(numbers)}", "jobType": "noop", "scheduledAt": due}
                for _ in range(per_send)
            ]
            response = await client.post("/jobs/batch", json={"tenantId": TENANT, "jobs": jobs})
            if response.status_code != 200 or response.json()["created"] != per_send:
                raise RuntimeError(f"a batch failed: {response.status_code} {response.text[:300]}")
            await asyncio.sleep(max(0.0, started + (tick + 1) * 0.1 - time.monotonic()))
        samples.append([round(time.monotonic() - started, 1), file_mb(path), count_status(path, Status.COMPLETED)])
    return samples


def soak(args: argparse.Namespace, keep: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="jobsched-soak-") as folder:
        path = Path(folder) / "jobsched.db"
        with dev_node(path, RETAIN_COMPLETED=keep, REAPER_INTERVAL=f"{args.reaper}s") as (base_url, dev):
            samples = asyncio.run(steady_load(base_url, args.rate, args.duration, path, args.sample))
            deleted = dev.metric("retention_deleted_jobs_total")
    half = next(s for s in samples if s[0] >= samples[-1][0] / 2)
    growth = (samples[-1][1] - half[1]) / half[1] if half[1] else 0.0
    return {
        "retain_completed": keep,
        "samples": samples,
        "final_mb": samples[-1][1],
        "growth_last_half": round(growth, 3),
        "deleted": deleted or 0,
        "completed": samples[-1][2],
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rate", type=int, default=500, help="jobs/s sent (default 500)")
    parser.add_argument("--duration", type=float, default=180.0, help="seconds of each run (default 180)")
    parser.add_argument("--keep", type=float, default=30.0, help="RETAIN_COMPLETED in seconds (default 30)")
    parser.add_argument("--reaper", type=float, default=5.0, help="REAPER_INTERVAL in seconds (default 5)")
    parser.add_argument("--sample", type=float, default=10.0, help="seconds between size samples (default 10)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    ours = soak(args, f"{args.keep:g}s")
    baseline = soak(args, "forever")
    for label, result in (("retention on ", ours), ("retention off", baseline)):
        series = "  ".join(f"{t:g}s:{mb:g}" for t, mb, _ in result["samples"])
        print(f"{label} ({result['retain_completed']}): MB {series}")
        print(
            f"{'':<14} growth over the last half {result['growth_last_half']:.1%}, "
            f"{result['completed']:.0f} completed, {result['deleted']:.0f} deleted"
        )
    met = ours["growth_last_half"] <= TARGET_GROWTH
    value = ratio(False, ours["final_mb"], baseline["final_mb"])
    targets = {
        "levels_off": target("file growth over the last half <= 10% with retention", ours["growth_last_half"], met)
    }
    return envelope("retention-soak", ours, baseline, value, "sqlite", targets=targets)


SCENARIO = Scenario(
    "retention-soak",
    "the SQLite file under a steady load: levels off with retention, grows without",
    add_arguments,
    run,
)
