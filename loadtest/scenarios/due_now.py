"""`due-now`: jobs created due at once, at RATE per second for DURATION seconds through the API
(`python -m loadtest`'s open loop), in `jobsched dev` (--mode embedded) or in the distributed stack (--mode
distributed: an API, a scheduler and a noop executor as processes on MongoDB/Kafka, the API nudging the
scheduler over UDP). Figure: created → first attempt's start, from the server's timestamps. Peer: Celery 5
tasks sent with `apply_async()` at the same rate (send → start). Target: p50 <= 20 ms, p99 <= 100 ms."""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx2 as httpx

from loadtest.__main__ import figures
from loadtest.__main__ import run as open_loop
from loadtest.benchkit import Scenario, envelope, ratio, scratch_database, server_setting, store_kind, target
from loadtest.celery_peer import add_celery_arguments, measure_celery_timed
from loadtest.procs import Service, distributed_stack, free_port, pipeline_env, running, wait_until
from shared.model import format_time, utc_now

TARGET_P50_MS = 20.0
TARGET_P99_MS = 100.0


def answers(url: str) -> Callable[[], bool]:
    def check() -> bool:
        try:
            return httpx.get(url, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    return check


@contextmanager
def embedded_api(folder: str) -> Iterator[str]:
    port = free_port()
    env = {"JOBSCHED_DB": os.path.join(folder, "jobsched.db"), "API_PORT": str(port)}
    with running(lambda: Service("dev", env)):
        yield f"http://127.0.0.1:{port}"


@contextmanager
def distributed_api(uri: str, brokers: str) -> Iterator[str]:
    with scratch_database(uri) as database, distributed_stack(pipeline_env(uri, brokers, database, {})) as stack:
        yield stack.base_url


def warm_up(base_url: str, job_type: str = "noop", timeout_s: float = 120) -> None:
    """One job through every part (imports, connections, the executor's partitions assigned). A 400 is sent
    again: the API learns a plug-in's type only once its executor has announced it."""
    body = {
        "idempotencyKey": f"warm-up-{uuid.uuid4().hex[:8]}",
        "tenantId": "warm-up",
        "jobType": job_type,
        "scheduledAt": format_time(utc_now()),
    }
    created: list[str] = []

    def create() -> bool:
        response = httpx.post(f"{base_url}/jobs", json=body, timeout=10)
        if response.status_code == 201:
            created.append(response.json()["id"])
        elif response.status_code != 400:
            raise RuntimeError(f"the warm-up job was refused: {response.status_code} {response.text[:300]}")
        return bool(created)

    wait_until(create, timeout_s, f"the API to take a {job_type} job", interval_s=0.5)
    wait_until(
        lambda: httpx.get(f"{base_url}/jobs/{created[0]}", timeout=10).json()["status"] == "completed",
        timeout_s,
        "the warm-up job to complete",
    )


def measure_due_now(base_url: str, rate: float, duration_s: float, settle_s: float) -> dict[str, Any]:
    wait_until(answers(f"{base_url}/readyz"), 120, "the API to be ready")
    warm_up(base_url)
    result = figures(asyncio.run(open_loop(base_url, rate, duration_s, "noop", settle_s)), rate, duration_s)
    return {**result, "setting": "defaults"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mode", choices=("embedded", "distributed"), default="embedded")
    parser.add_argument("--rate", type=float, default=200.0, help="jobs created per second (default 200)")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of creates (default 30)")
    parser.add_argument("--settle", type=float, default=30.0, help="seconds allowed for the last jobs to finish")
    add_celery_arguments(parser)


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.mode == "embedded":
        with tempfile.TemporaryDirectory(prefix="jobsched-due-now-") as folder, embedded_api(folder) as url:
            ours = measure_due_now(url, args.rate, args.duration, args.settle)
        store = "sqlite"
    else:
        uri, brokers = server_setting("MONGO_URI"), server_setting("KAFKA_BROKERS")
        with distributed_api(uri, brokers) as url:
            ours = measure_due_now(url, args.rate, args.duration, args.settle)
        store = store_kind(uri)
    peer = measure_celery_timed(args.rate, args.duration, args.settle, args.pool, args.concurrency, ahead=False)
    start = ours["due_now"]["created_to_start_ms"]
    peer_start = peer["send_to_start_ms"]
    value = ratio(False, start["p99"], peer_start["p99"])
    every = ours["due_now"]["finished"] == ours["due_now"]["jobs"] == ours["sent"]
    met = start["p50"] <= TARGET_P50_MS and start["p99"] <= TARGET_P99_MS and every
    print(
        f"jobsched ({args.mode}) created → start p50 {start['p50']} p99 {start['p99']} max {start['max']} ms, "
        f"{ours['due_now']['finished']}/{ours['sent']} finished; ack p99 {ours['ack_ms']['p99']} ms"
    )
    print(f"{peer['setting']}: send → start p50 {peer_start['p50']} p99 {peer_start['p99']} max {peer_start['max']} ms")
    print(f"ratio (Celery p99 / jobsched p99): {value:.2f}x; target p50 <= 20, p99 <= 100 ms: {met}")
    targets = {
        "created_to_start": target(
            f"created → start p50 <= {TARGET_P50_MS:g} ms and p99 <= {TARGET_P99_MS:g} ms at {args.rate:g}/s, all run",
            start["p99"],
            met,
        )
    }
    return envelope("due-now", ours, peer, value, store, mode=args.mode, targets=targets)


SCENARIO = Scenario("due-now", "created → start of jobs due now (p50/p99 ms) vs Celery apply_async", add_arguments, run)
