"""Write contention on the embedded store, through `jobsched dev` as a process: 64 writers create single-attempt
`noop` jobs while listers read a tenant of 5,000 jobs at limit=5000. Overload may be answered 503 (with
Retry-After), but no job may lose its attempt: every job created is completed, none in the DLQ. The test prints
the 503 rate and the latency it saw; speed is the benchmarks' business, not an assertion here."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import httpx2 as httpx
import pytest

from shared.model import format_time, utc_now
from shared.store.base import NewJob
from shared.store.sqlite import SqliteJobStore
from tests.e2e.devmode import Dev
from tests.support import wait_until

WRITERS = 64
POSTS = 2048
LISTERS = 4
BIG_TENANT_JOBS = 5000
PAYLOAD = {"filler": "x" * 1024}


def fill_big_tenant(path: Path) -> None:
    """The tenant the listers read: far-future jobs, so they never run."""
    store = SqliteJobStore(path, durable=False)
    store.ensure_schema()
    later = utc_now() + timedelta(days=365)
    for n in range(BIG_TENANT_JOBS):
        store.create(
            NewJob(idempotencyKey=f"big-{n}", tenantId="big", jobType="noop", scheduledAt=later, payload=PAYLOAD)
        )
    store.close()


@pytest.mark.timeout(900)
def test_writers_and_long_listings_together_lose_no_attempt(tmp_path: Path) -> None:
    dev = Dev(tmp_path)
    fill_big_tenant(dev.db)
    process = dev.start()
    try:
        statuses, latencies, created, listings = asyncio.run(load(dev.port))
        rejected = statuses[503]
        retry_after_missing = statuses.pop("503 without Retry-After", 0)
        ordered = sorted(latencies)
        print(
            f"\n{POSTS} POSTs by {WRITERS} writers beside {LISTERS} listers of {BIG_TENANT_JOBS} jobs: "
            f"{dict(statuses)}; 503 rate {rejected / POSTS:.1%}; POST latency p50 {ordered[len(ordered) // 2]:.3f}s "
            f"p99 {ordered[int(len(ordered) * 0.99)]:.3f}s max {ordered[-1]:.3f}s; listings completed {listings}"
        )
        assert retry_after_missing == 0
        assert set(statuses) <= {201, 503}, statuses
        assert created, "no job was created"

        def final() -> dict[str, int] | None:
            jobs = {
                j["id"]: j["status"] for j in dev.http.get("/jobs", params={"tenantId": "load", "limit": "5000"}).json()
            }
            counts = Counter(jobs[i] for i in created)
            return dict(counts) if set(counts) <= {"completed", "dlq"} else None

        outcome = wait_until(final, 300, "every created job to finish")
        assert outcome == {"completed": len(created)}, outcome
    finally:
        process.stop()
        dev.http.close()


async def load(port: int) -> tuple[Counter[int | str], list[float], list[str], int]:
    statuses: Counter[int | str] = Counter()
    latencies: list[float] = []
    created: list[str] = []
    listings = 0
    done = asyncio.Event()
    limits = httpx.Limits(max_connections=WRITERS + LISTERS, max_keepalive_connections=WRITERS + LISTERS)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120, limits=limits) as client:

        async def writer(first: int) -> None:
            for n in range(first, POSTS, WRITERS):
                body = {
                    "idempotencyKey": f"load-{n}",
                    "tenantId": "load",
                    "jobType": "noop",
                    "maxAttempts": 1,
                    "scheduledAt": format_time(utc_now()),
                }
                started = time.perf_counter()
                response = await client.post("/jobs", json=body)
                latencies.append(time.perf_counter() - started)
                statuses[response.status_code] += 1
                if response.status_code == 201:
                    created.append(response.json()["id"])
                elif response.status_code == 503 and "retry-after" not in response.headers:
                    statuses["503 without Retry-After"] += 1

        async def lister() -> None:
            nonlocal listings
            while not done.is_set():
                response = await client.get("/jobs", params={"tenantId": "big", "limit": "5000"})
                if response.status_code == 200:
                    assert len(response.json()) == BIG_TENANT_JOBS
                    listings += 1

        listers = [asyncio.create_task(lister()) for _ in range(LISTERS)]
        await asyncio.gather(*(writer(w) for w in range(WRITERS)))
        done.set()
        await asyncio.gather(*listers)
    return statuses, latencies, created, listings
