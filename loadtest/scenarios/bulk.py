"""`bulk`: jobs/s created through POST /jobs/batch against single POST /jobs creates, on the same server in the
same run. `--store sqlite` (default) runs `python -m services.dev` on a fresh SQLite file (the whole product:
its executors serve, but every job is due in a year, so only the creates are measured); `--store mongo` runs
`python -m services.api` on a scratch database of MONGO_URI. Closed loops (each client sends its next request
when the previous one is answered) for DURATION seconds after a warm-up: single creates with CLIENTS clients,
batches of BATCH jobs with BATCH_CLIENTS clients. Then LOAD jobs are loaded through batches and timed (the
"million jobs in minutes" figure, for `--load 1000000`). Target: batch jobs/s >= 10x single-create jobs/s.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx2 as httpx

from loadtest.__main__ import Sample
from loadtest.benchkit import Scenario, envelope, ratio, scratch_database, server_setting, store_kind, target
from loadtest.procs import Service, free_port, running, wait_until
from loadtest.scenarios.api import creating, dev_node, is_ready, saturate
from shared.model import format_time, utc_now

TARGET_RATIO = 10.0
TENANT = "bulk-bench"


def batching(run_id: str, size: int) -> Any:
    """Batch requests of `size` jobs with keys unique to `run_id`; a batch counts only when all of it is created."""
    numbers = itertools.count()
    due = format_time(utc_now() + timedelta(days=365))

    async def create_batch(client: httpx.AsyncClient) -> Sample:
        first = next(numbers) * size
        jobs = [
            {"idempotencyKey": f"bulk-{run_id}-{first + i}", "jobType": "noop", "scheduledAt": due, "payload": {}}
            for i in range(size)
        ]
        sample = Sample(sent_at=time.perf_counter())
        try:
            response = await client.post("/jobs/batch", json={"tenantId": TENANT, "jobs": jobs})
        except httpx.HTTPError as exc:
            sample.error = type(exc).__name__
            return sample
        sample.ack_ms = (time.perf_counter() - sample.sent_at) * 1000
        sample.status = response.status_code
        refused = [r for r in response.json()["results"] if r["status"] != 201] if response.status_code == 200 else []
        if refused:
            sample.status, sample.error = 0, f"{len(refused)} not created, e.g. {refused[0]}"
        return sample

    return create_batch


def load(base_url: str, count: int, size: int, clients: int) -> dict[str, Any]:
    """`count` jobs through batches of `size`, `clients` requests at a time: seconds and jobs/s."""
    operation = batching(uuid.uuid4().hex[:8], size)
    batches = -(-count // size)

    async def go() -> float:
        left = itertools.count()
        limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
        async with httpx.AsyncClient(base_url=base_url, timeout=60, limits=limits) as client:

            async def worker() -> None:
                while next(left) < batches:
                    sample = await operation(client)
                    if sample.status != 200:
                        raise RuntimeError(f"a batch failed: {sample.status} {sample.error}")

            started = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(clients)))
            return time.perf_counter() - started

    seconds = asyncio.run(go())
    return {"jobs": batches * size, "seconds": round(seconds, 2), "jobs_per_s": round(batches * size / seconds, 1)}


@contextmanager
def server(store: str) -> Iterator[str]:
    if store == "sqlite":
        with tempfile.TemporaryDirectory(prefix="jobsched-bulk-") as folder, dev_node(Path(folder) / "dev.db") as node:
            yield node[0]
        return
    uri, port = server_setting("MONGO_URI"), free_port()
    base_url = f"http://127.0.0.1:{port}"
    with scratch_database(uri) as database:
        env = {"MONGO_URI": uri, "MONGO_DB": database, "API_PORT": str(port)}
        with running(lambda: Service("api", env)) as [api]:
            wait_until(lambda: is_ready(base_url, api), 60, "the API to answer /readyz")
            yield base_url


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", choices=("sqlite", "mongo"), default="sqlite", help="default sqlite")
    parser.add_argument("--clients", type=int, default=16, help="clients of the single-create loop (default 16)")
    parser.add_argument("--batch", type=int, default=1000, help="jobs per batch (default 1000)")
    parser.add_argument("--batch-clients", type=int, default=4, help="clients of the batch loop (default 4)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of each closed loop (default 10)")
    parser.add_argument("--load", type=int, default=100_000, help="jobs loaded through batches, timed (default 1e5)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    with server(args.store) as base_url:
        single = saturate(base_url, args.clients, args.duration, creating(uuid.uuid4().hex[:8]), 201)
        batched = saturate(base_url, args.batch_clients, args.duration, batching(uuid.uuid4().hex[:8], args.batch), 200)
        loaded = load(base_url, args.load, args.batch, args.batch_clients)
    batched["jobs_per_s"] = round(batched["requests_per_s"] * args.batch, 1)
    single["jobs_per_s"] = single["requests_per_s"]
    value = ratio(True, batched["jobs_per_s"], single["jobs_per_s"])
    print(f"POST /jobs        {args.clients} clients: {single['jobs_per_s']:10.1f} jobs/s  errors {single['errors']}")
    print(
        f"POST /jobs/batch  {args.batch_clients} clients x {args.batch}: {batched['jobs_per_s']:10.1f} jobs/s  "
        f"request p50 {batched['ack_ms']['p50']} p99 {batched['ack_ms']['p99']} ms  errors {batched['errors']}"
    )
    print(f"load of {loaded['jobs']} jobs through batches: {loaded['seconds']} s ({loaded['jobs_per_s']} jobs/s)")
    print(f"ratio (batch / single jobs/s): {value:.1f}x (target >= {TARGET_RATIO:g}x)")
    store = "sqlite" if args.store == "sqlite" else store_kind(server_setting("MONGO_URI"))
    targets = {"batch_ge_10x_single": target("batch jobs/s >= 10x single creates", value, value >= TARGET_RATIO)}
    ours = {**batched, "endpoint": "POST /jobs/batch", "load": loaded}
    return envelope("bulk", ours, {**single, "endpoint": "POST /jobs"}, value, store, targets=targets)


SCENARIO = Scenario(
    "bulk", "jobs/s through POST /jobs/batch vs single POST /jobs, and a timed load", add_arguments, run
)
