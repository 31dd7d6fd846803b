"""`api`: a real `python -m services.api` process on FerretDB. Closed loop (CLIENTS concurrent clients, each
sending its next request as soon as the previous one is answered, for DURATION seconds after a 1 s warm-up):
create-job requests/s and ack p50/p99 at saturation, next to the same server's `/healthz` measured the same
way (the baseline: the server's ceiling with no store call). Then an open loop (loadtest/__main__.py's
machinery) at a fixed RATE (default 200 req/s) for OPEN_DURATION seconds: ack p50/p95/p99.
Targets: create rate >= 25% of /healthz; ack p99 <= 50 ms at 200 req/s. The load generator runs on the same
machine (one asyncio process), so both rates are bounded by what it and the server share."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2 as httpx

from loadtest.__main__ import Sample, figures, send_one
from loadtest.__main__ import run as open_loop
from loadtest.benchkit import Figures, Scenario, envelope, ratio, scratch_database, server_setting, store_kind, target
from loadtest.procs import Service, free_port, running, wait_until
from loadtest.stats import summary

Operation = Callable[[httpx.AsyncClient], Awaitable[Sample]]
TARGET_SHARE = 0.25
TARGET_ACK_P99_MS = 50.0
WARM_UP_S = 1.0


async def closed_loop(base_url: str, clients: int, duration_s: float, operation: Operation, ok: int) -> Figures:
    """`clients` workers each repeating `operation` until `duration_s` is over: rate of `ok` answers and
    their latency."""
    samples: list[Sample] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base_url, timeout=30, limits=limits) as client:
        end = time.perf_counter() + duration_s

        async def worker() -> None:
            while time.perf_counter() < end:
                samples.append(await operation(client))

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        elapsed = time.perf_counter() - start
    answered = [s for s in samples if s.status == ok]
    errors: dict[str, int] = {}
    for sample in samples:
        if sample.status != ok:
            problem = sample.error or str(sample.status)
            errors[problem] = errors.get(problem, 0) + 1
    return {
        "clients": clients,
        "seconds": round(elapsed, 2),
        "requests_per_s": round(len(answered) / elapsed, 1),
        "ok": len(answered),
        "errors": errors,
        "ack_ms": summary([s.ack_ms for s in answered if s.ack_ms is not None]),
    }


def creating(run_id: str) -> Operation:
    """Create requests with keys unique to `run_id` (numbered across every loop that uses them)."""
    numbers = itertools.count()

    async def create(client: httpx.AsyncClient) -> Sample:
        sample = Sample(sent_at=time.perf_counter())
        await send_one(client, sample, "noop", f"load-{run_id}", run_id, next(numbers))
        return sample

    return create


async def healthz(client: httpx.AsyncClient) -> Sample:
    sample = Sample(sent_at=time.perf_counter())
    try:
        response = await client.get("/healthz")
    except httpx.HTTPError as exc:
        sample.error = type(exc).__name__
        return sample
    sample.ack_ms = (time.perf_counter() - sample.sent_at) * 1000
    sample.status = response.status_code
    return sample


def saturate(base_url: str, clients: int, duration_s: float, operation: Operation, ok: int) -> Figures:
    asyncio.run(closed_loop(base_url, clients, min(WARM_UP_S, duration_s), operation, ok))
    return asyncio.run(closed_loop(base_url, clients, duration_s, operation, ok))


def fixed_rate(base_url: str, rate: float, duration_s: float) -> Figures:
    result = figures(asyncio.run(open_loop(base_url, rate, duration_s, "noop", settle_s=0.0)), rate, duration_s)
    return {k: result[k] for k in ("rate", "duration_s", "achieved_rate", "sent", "ok", "errors", "ack_ms")}


def is_ready(base_url: str, api: Service) -> bool:
    api.check_alive()
    try:
        return httpx.get(f"{base_url}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def dev_node(path: Path, **env: str) -> Iterator[tuple[str, Service]]:
    """`python -m services.dev` on the SQLite file `path` (with `env`), once it answers /readyz: its URL and process."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    with running(lambda: Service("dev", {"JOBSCHED_DB": str(path), "API_PORT": str(port), **env})) as [dev]:
        wait_until(lambda: is_ready(base_url, dev), 120, "jobsched dev to answer /readyz")
        yield base_url, dev


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients of the closed loops (default 16)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of each closed loop (default 10)")
    parser.add_argument("--rate", type=float, default=200.0, help="requests/s of the open loop (default 200)")
    parser.add_argument("--open-duration", type=float, default=30.0, help="seconds of the open loop (default 30)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    uri = server_setting("MONGO_URI")
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    with scratch_database(uri) as database:
        api_env = {"MONGO_URI": uri, "MONGO_DB": database, "API_PORT": str(port)}
        with running(lambda: Service("api", api_env)) as [api]:
            wait_until(lambda: is_ready(base_url, api), 60, "the API to answer /readyz")
            health = saturate(base_url, args.clients, args.duration, healthz, 200)
            create = saturate(base_url, args.clients, args.duration, creating(uuid.uuid4().hex[:8]), 201)
            paced = fixed_rate(base_url, args.rate, args.open_duration)
    ours = {**create, "endpoint": "POST /jobs", "open_loop": paced}
    baseline = {**health, "endpoint": "GET /healthz"}
    share = ratio(True, create["requests_per_s"], health["requests_per_s"])
    p99 = paced["ack_ms"]["p99"]
    for name, loop in (("POST /jobs", create), ("GET /healthz", baseline)):
        late = loop["ack_ms"]
        print(
            f"{name:<14} {args.clients} clients: {loop['requests_per_s']:8.1f} req/s  ack p50 {late['p50']:6.1f} "
            f"p99 {late['p99']:6.1f} ms  errors {loop['errors']}"
        )
    paced_ack = paced["ack_ms"]
    print(
        f"POST /jobs at {args.rate:g} req/s (achieved {paced['achieved_rate']}): ack p50 {paced_ack['p50']} "
        f"p95 {paced_ack['p95']} p99 {p99} ms  errors {paced['errors']}"
    )
    print(f"ratio (create / healthz rate): {share:.2f} (target >= {TARGET_SHARE}); ack p99 target <= 50 ms")
    targets = {
        "create_rate_ge_25pct_healthz": target("create req/s >= 25% of /healthz req/s", share, share >= TARGET_SHARE),
        "ack_p99_le_50ms_at_200": target(
            f"ack p99 <= {TARGET_ACK_P99_MS:.0f} ms at {args.rate:g} req/s", p99, p99 <= TARGET_ACK_P99_MS
        ),
    }
    return envelope("api", ours, baseline, share, store_kind(uri), targets=targets)


SCENARIO = Scenario("api", "create-job rate and ack latency vs /healthz, and ack p99 at 200 req/s", add_arguments, run)
