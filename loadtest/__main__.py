"""`python -m loadtest --rate 20 --duration 30s [--base-url URL] [--api-key KEY --tenant T] [--json FILE] [--plot FILE]`

Open-loop load against a running jobsched API: create requests go out on a fixed schedule (rate per second)
whether or not earlier ones have been answered, so a slow server shows up as latency instead of silently
lowering the load. Jobs are due at once, or (a share of them, --future-share) --ahead in the future. Every
created job is then polled until `completed` or `dlq`. Reports, each p50/p95/p99/max in ms: ack latency (the
POST, as the client saw it), and apart for due-now and future jobs the server's own timestamps (so neither
the polling nor the order of the polls can shift them): due-now jobs created → first attempt's start and
created → last attempt's end (end-to-end), future jobs scheduledAt → start (lateness) and → end; plus the
achieved rate and errors by status. The server's clocks must agree (one machine, or synchronised hosts).
Against an API with AUTH=required, pass a writer key (--api-key, or JOBSCHED_API_KEY) and its tenant (--tenant);
the jobs go to that tenant instead of a fresh `load-<run id>` one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import httpx2 as httpx

from loadtest.stats import summary
from shared.cli import OneLineParser, fail, one_line_errors
from shared.durations import parse_duration
from shared.local_stack import API_URL_VARIABLE, tool_environment
from shared.model import format_time, parse_time, utc_now

DEFAULT_BASE_URL = "http://127.0.0.1:8080"
API_KEY_VARIABLE = "JOBSCHED_API_KEY"
POLL_INTERVAL_S = 0.1
MAX_POLLERS = 64
FINAL = ("completed", "dlq")


@dataclass
class Sample:
    sent_at: float
    ahead_s: float = 0.0  # scheduled this far after the send: 0 for a job due now
    ack_ms: float | None = None
    status: int | None = None
    job_id: str | None = None
    # the server's timestamps: the job's createdAt and scheduledAt, the first attempt's start, the last one's end
    created_at: datetime | None = None
    scheduled_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error: str | None = None

    @property
    def due_now(self) -> bool:
        return self.ahead_s == 0


@dataclass
class Report:
    tenant: str = ""
    samples: list[Sample] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)


async def send_one(client: httpx.AsyncClient, sample: Sample, job_type: str, tenant: str, run: str, n: int) -> None:
    scheduled = utc_now() + timedelta(seconds=sample.ahead_s)
    body = {
        "idempotencyKey": f"load-{run}-{n}",
        "tenantId": tenant,
        "jobType": job_type,
        "scheduledAt": format_time(scheduled),
        "payload": {},
    }
    try:
        response = await client.post("/jobs", json=body)
    except httpx.HTTPError as exc:
        sample.error = type(exc).__name__  # no answer: counted by error name, no ack latency
        return
    sample.ack_ms = (time.perf_counter() - sample.sent_at) * 1000
    sample.status = response.status_code
    if response.status_code == 201:
        job = response.json()
        sample.job_id = job["id"]
        sample.created_at = parse_time(job["createdAt"])
        sample.scheduled_at = parse_time(job["scheduledAt"])


async def follow(client: httpx.AsyncClient, sample: Sample, limit: asyncio.Semaphore, deadline: float) -> None:
    """Poll the job until it is final (or the deadline), then read its attempts' start and end."""
    async with limit:
        while time.perf_counter() < deadline:
            job = (await client.get(f"/jobs/{sample.job_id}")).json()
            if job.get("status") in FINAL:
                executions = (await client.get(f"/jobs/{sample.job_id}/executions")).json()
                started = [parse_time(e["startedAt"]) for e in executions if "startedAt" in e]
                finished = [parse_time(e["finishedAt"]) for e in executions if "finishedAt" in e]
                sample.started_at = min(started, default=None)
                sample.finished_at = max(finished, default=None) or parse_time(job["updatedAt"])
                return
            await asyncio.sleep(POLL_INTERVAL_S)


def progress(text: str) -> None:
    if sys.stderr.isatty():
        print(f"\r{text:<78}", end="", file=sys.stderr, flush=True)


async def run(
    base_url: str,
    rate: float,
    duration_s: float,
    job_type: str,
    settle_s: float,
    future_share: float = 0.0,
    ahead_s: float = 5.0,
    api_key: str | None = None,
    tenant: str | None = None,
) -> Report:
    total = int(rate * duration_s)
    run_id = uuid.uuid4().hex[:8]
    report = Report(tenant=tenant or f"load-{run_id}")
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with httpx.AsyncClient(base_url=base_url, timeout=30, limits=limits, headers=headers) as client:
        start = time.perf_counter()
        sends = []
        for n in range(total):
            await asyncio.sleep(max(0.0, start + n / rate - time.perf_counter()))
            future = future_share > 0 and (n + 1) * future_share // 1 > n * future_share // 1  # spread evenly
            sample = Sample(sent_at=time.perf_counter(), ahead_s=ahead_s if future else 0.0)
            report.samples.append(sample)
            sends.append(asyncio.create_task(send_one(client, sample, job_type, report.tenant, run_id, n)))
            progress(f"sending {n + 1}/{total}")
        await asyncio.gather(*sends)
        for sample in report.samples:
            problem = sample.error or (str(sample.status) if sample.status != 201 else None)
            if problem:
                report.errors[problem] = report.errors.get(problem, 0) + 1
        created = [s for s in report.samples if s.job_id]
        limit = asyncio.Semaphore(MAX_POLLERS)
        deadline = time.perf_counter() + settle_s
        deadline += max((s.ahead_s for s in created), default=0.0)
        pollers = [asyncio.create_task(follow(client, s, limit, deadline)) for s in created]
        while not all(p.done() for p in pollers):
            done = sum(1 for s in created if s.finished_at)
            progress(f"waiting for jobs to finish {done}/{len(created)}")
            await asyncio.wait(pollers, timeout=0.5)
        progress("")
    return report


def _ms(later: datetime | None, earlier: datetime | None) -> float | None:
    return (later - earlier).total_seconds() * 1000 if later and earlier else None


def _summary(values: list[float | None]) -> dict[str, float]:
    return summary([v for v in values if v is not None])


def figures(report: Report, rate: float, duration_s: float) -> dict[str, Any]:
    acked = [s.ack_ms for s in report.samples if s.ack_ms is not None]
    sent_span = (report.samples[-1].sent_at - report.samples[0].sent_at) if len(report.samples) > 1 else 0
    created = [s for s in report.samples if s.job_id]
    due_now = [s for s in created if s.due_now]
    future = [s for s in created if not s.due_now]
    result: dict[str, Any] = {
        "rate": rate,
        "duration_s": duration_s,
        "achieved_rate": round((len(report.samples) - 1) / sent_span, 1) if sent_span else 0.0,
        "sent": len(report.samples),
        "ok": sum(1 for s in report.samples if s.status == 201),
        "finished": sum(1 for s in created if s.finished_at),
        "errors": report.errors,
        "tenantId": report.tenant,
        "ack_ms": summary(acked),
    }
    if due_now:  # each group only when it has jobs: a percentile of nothing is not a figure
        result["due_now"] = {
            "jobs": len(due_now),
            "finished": sum(1 for s in due_now if s.finished_at),
            "created_to_start_ms": _summary([_ms(s.started_at, s.created_at) for s in due_now]),
            "e2e_ms": _summary([_ms(s.finished_at, s.created_at) for s in due_now]),
        }
    if future:
        result["future"] = {
            "jobs": len(future),
            "finished": sum(1 for s in future if s.finished_at),
            "lateness_ms": _summary([_ms(s.started_at, s.scheduled_at) for s in future]),
            "due_to_end_ms": _summary([_ms(s.finished_at, s.scheduled_at) for s in future]),
        }
    return result


def plot(report: Report, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    acks = [s.ack_ms for s in report.samples if s.ack_ms is not None]
    e2e = [v for s in report.samples if s.due_now and (v := _ms(s.finished_at, s.created_at)) is not None]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    panels = ((axes[0], acks, "ack latency (ms)"), (axes[1], e2e, "due now: created → finished (ms)"))
    for ax, values, title in panels:
        ax.hist(values, bins=50)
        ax.set_title(title)
        ax.set_ylabel("jobs")
    fig.tight_layout()
    fig.savefig(path)


@one_line_errors("python -m loadtest")
def main() -> None:
    parser = OneLineParser(
        prog="python -m loadtest", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    environment = tool_environment("python -m loadtest")
    default_url = environment.get(API_URL_VARIABLE, DEFAULT_BASE_URL)
    parser.add_argument("--rate", type=float, default=20.0, help="create requests per second (default 20)")
    parser.add_argument("--duration", default="30s", help="how long to send, e.g. 30s or 2m (default 30s)")
    parser.add_argument("--base-url", default=default_url, help=f"the API (default {default_url})")
    parser.add_argument(
        "--api-key", default=environment.get(API_KEY_VARIABLE), help=f"a writer key (default ${API_KEY_VARIABLE})"
    )
    parser.add_argument("--tenant", help="the tenant to create the jobs in (default a fresh load-<run id>)")
    parser.add_argument("--job-type", default="noop")
    parser.add_argument("--settle", default="120s", help="how long to wait for jobs to finish after sending")
    parser.add_argument("--future-share", type=float, default=0.0, help="share of jobs scheduled ahead (0 to 1)")
    parser.add_argument("--ahead", default="5s", help="how far ahead those jobs are scheduled (default 5s)")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--plot", help="write a latency histogram PNG to this file (needs matplotlib)")
    args = parser.parse_args()
    if args.rate <= 0:
        parser.error("--rate must be positive")
    if not 0 <= args.future_share <= 1:
        parser.error("--future-share must be from 0 to 1")
    try:
        duration_s = parse_duration(args.duration).total_seconds()
        settle_s = parse_duration(args.settle).total_seconds()
        ahead_s = parse_duration(args.ahead).total_seconds()
    except ValueError as exc:
        parser.error(str(exc))
    if args.api_key and not args.tenant:
        note = "no --tenant: the jobs go to a fresh tenant, which only an admin key may write"
        print(f"python -m loadtest: {note}", file=sys.stderr)
    check_reachable(args.base_url)
    report = asyncio.run(
        run(
            args.base_url,
            args.rate,
            duration_s,
            args.job_type,
            settle_s,
            args.future_share,
            ahead_s,
            args.api_key or None,
            args.tenant,
        )
    )
    result = figures(report, args.rate, duration_s)
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=2)
    if args.plot:
        plot(report, args.plot)


def check_reachable(base_url: str) -> None:
    """Fail in one line before sending anything when the API does not answer or is not ready."""
    try:
        ready = httpx.get(f"{base_url.rstrip('/')}/readyz", timeout=5)
    except httpx.HTTPError as exc:
        problem = f"cannot reach the API at {base_url} ({type(exc).__name__}); start it or pass --base-url"
        fail("python -m loadtest", problem)
    if ready.status_code != 200:
        fail("python -m loadtest", f"the API at {base_url} is not ready (/readyz answered {ready.status_code})")


if __name__ == "__main__":
    main()
