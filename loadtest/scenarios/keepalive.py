"""`keepalive`: one client sending requests one after another, as an application that enqueues a job per web
request does, against `jobsched dev` (--mode embedded) or `jobsched api` on MongoDB (--mode distributed).
jobsched: every request on one kept-alive connection (an `httpx.Client`, what the project's client and most
applications hold). Baseline: the same requests, each on a new connection (the same client with no kept-alive
connections). Reported per endpoint (`GET /jobs/{id}`, `POST /jobs`, `GET /healthz`): p50/p99/max ms. A reused
connection should answer at least as fast as a new one. Target: kept-alive p50 <= 3 ms (embedded)."""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx2 as httpx

from loadtest.benchkit import Figures, Scenario, envelope, ratio, scratch_database, server_setting, store_kind, target
from loadtest.procs import Service, free_port, running, wait_until
from loadtest.scenarios.due_now import answers, embedded_api
from loadtest.stats import summary

TARGET_P50_MS = 3.0
WARM_UP = 50
Request = Callable[[httpx.Client], httpx.Response]


@contextmanager
def api_alone(uri: str) -> Iterator[str]:
    port = free_port()
    with (
        scratch_database(uri) as database,
        running(lambda: Service("api", {"MONGO_URI": uri, "MONGO_DB": database, "API_PORT": str(port)})),
    ):
        yield f"http://127.0.0.1:{port}"


def requests_of(job_id: str) -> dict[str, Request]:
    keys = itertools.count()
    run = uuid.uuid4().hex[:8]

    def create(client: httpx.Client) -> httpx.Response:
        body = {
            "idempotencyKey": f"keepalive-{run}-{next(keys)}",
            "tenantId": f"load-{run}",
            "jobType": "noop",
            "scheduledAt": "2099-01-01T00:00:00Z",
            "payload": {},
        }
        return client.post("/jobs", json=body)

    return {
        "GET /jobs/{id}": lambda client: client.get(f"/jobs/{job_id}"),
        "POST /jobs": create,
        "GET /healthz": lambda client: client.get("/healthz"),
    }


def sequential(client: httpx.Client, request: Request, count: int) -> Figures:
    """`count` requests one after another (after WARM_UP more): latency of each, as the client saw it."""
    for _ in range(WARM_UP):
        request(client)
    latencies: list[float] = []
    errors: dict[str, int] = {}
    for _ in range(count):
        started = time.perf_counter()
        response = request(client)
        latencies.append((time.perf_counter() - started) * 1000)
        if response.status_code >= 400:
            errors[str(response.status_code)] = errors.get(str(response.status_code), 0) + 1
    return {"requests": count, "ms": summary(latencies), "errors": errors}


def measure(base_url: str, count: int) -> tuple[Figures, Figures]:
    wait_until(answers(f"{base_url}/readyz"), 120, "the API to be ready")
    new_each_time = httpx.Limits(max_keepalive_connections=0)
    with (
        httpx.Client(base_url=base_url, timeout=10) as kept,
        httpx.Client(base_url=base_url, timeout=10, limits=new_each_time) as fresh,
    ):
        job = requests_of("")["POST /jobs"](kept)
        job.raise_for_status()
        requests = requests_of(job.json()["id"])
        ours = {name: sequential(kept, request, count) for name, request in requests.items()}
        baseline = {name: sequential(fresh, request, count) for name, request in requests.items()}
    return ours, baseline


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mode", choices=("embedded", "distributed"), default="embedded")
    parser.add_argument("--requests", type=int, default=500, help="requests per endpoint and connection kind")


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.mode == "embedded":
        with tempfile.TemporaryDirectory(prefix="keepalive-") as folder, embedded_api(folder) as base_url:
            ours, baseline = measure(base_url, args.requests)
        store = "sqlite"
    else:
        uri = server_setting("MONGO_URI")
        with api_alone(uri) as base_url:
            ours, baseline = measure(base_url, args.requests)
        store = store_kind(uri)
    print(f"{args.mode}: {args.requests} sequential requests per endpoint, ms")
    for name in ours:
        kept, fresh = ours[name]["ms"], baseline[name]["ms"]
        print(
            f"  {name:<15} kept-alive p50 {kept['p50']:6.2f} p99 {kept['p99']:6.2f}   "
            f"new connection p50 {fresh['p50']:6.2f} p99 {fresh['p99']:6.2f}"
        )
    p50s = [ours[name]["ms"]["p50"] for name in ours]
    worst = max(p50s)
    gain = ratio(False, ours["GET /jobs/{id}"]["ms"]["p50"], baseline["GET /jobs/{id}"]["ms"]["p50"])
    targets = {
        "kept_alive_p50_le_3ms": target(f"kept-alive p50 <= {TARGET_P50_MS:g} ms (every endpoint)", worst, worst <= 3),
        "kept_alive_not_slower": target("kept-alive p50 <= new-connection p50 (GET /jobs/{id})", gain, gain >= 1.0),
    }
    return envelope("keepalive", ours, baseline, gain, store, mode=args.mode, targets=targets)


SCENARIO = Scenario(
    "keepalive", "sequential requests on one kept-alive connection vs a new connection each", add_arguments, run
)
