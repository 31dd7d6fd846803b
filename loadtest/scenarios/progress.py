"""`progress`: what ctx.report_progress costs a handler that reports on every item of a tight loop, and how
fresh the job's progress is for whoever watches it. In one process (jobsched.testing.embedded, SQLite): a handler
loops over ITEMS items, reporting `{"done": n, "of": ITEMS}` at each; the baseline is the same loop without the
reports, in the same run. While each job runs the bench reads it every 100 ms, as a page would, and notes each new
report it sees and how old it was when seen. Figures: the loop's seconds and microseconds per item, the reports
written (new ones seen) per second, their age when read."""

from __future__ import annotations

import argparse
import time
from typing import Any

from jobsched import Client, HandlerContext, JobTypes
from jobsched.testing import embedded
from loadtest.benchkit import Scenario, envelope, ratio
from loadtest.stats import summary
from shared.model import utc_now

READ_EVERY_S = 0.1


def job_types(items: int) -> JobTypes:
    jobs = JobTypes()

    @jobs.handler("report-each", timeout=3600)
    def report_each(payload: dict[str, Any], ctx: HandlerContext) -> dict[str, float]:
        started, total = time.perf_counter(), 0
        for n in range(items):
            total += n
            ctx.report_progress({"done": n + 1, "of": items})
        return {"seconds": time.perf_counter() - started, "total": total}

    @jobs.handler("silent", timeout=3600)
    def silent(payload: dict[str, Any], ctx: HandlerContext) -> dict[str, float]:
        started, total = time.perf_counter(), 0
        for n in range(items):
            total += n
        return {"seconds": time.perf_counter() - started, "total": total}

    return jobs


def watched(client: Client, job_type: str, items: int) -> dict[str, Any]:
    """Run one job of `job_type`, reading it every READ_EVERY_S until it finishes."""
    job = client.create(job_type, {})
    seen: dict[str, float] = {}  # reportedAt → its age in ms when first read
    while not (finished := client.get(job.id)).finished:
        progress = finished.progress
        if progress is not None and progress.reported_at is not None:
            age_ms = (utc_now() - progress.reported_at).total_seconds() * 1000
            seen.setdefault(progress.reported_at.isoformat(), age_ms)
        time.sleep(READ_EVERY_S)
    seconds = float(finished.result["seconds"])
    return {
        "items": items,
        "handler_s": round(seconds, 3),
        "us_per_item": round(seconds / items * 1e6, 3),
        "reports_seen": len(seen),
        "reports_seen_per_s": round(len(seen) / seconds, 2) if seconds else 0.0,
        "age_when_read_ms": summary(list(seen.values())) if seen else {},
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--items", type=int, default=2_000_000, help="loop items, one report each (default 2000000)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    with embedded(job_types(args.items), tenant_id="progress-bench") as client:
        watched(client, "silent", 1000)  # warm-up: the executor and the API have served one job
        baseline = watched(client, "silent", args.items)
        ours = watched(client, "report-each", args.items)
    cost_us = round(ours["us_per_item"] - baseline["us_per_item"], 3)
    print(
        f"report on every item: {ours['items']} items in {ours['handler_s']} s ({ours['us_per_item']} us/item), "
        f"silent loop {baseline['handler_s']} s ({baseline['us_per_item']} us/item): {cost_us} us per report; "
        f"{ours['reports_seen']} reports written and read ({ours['reports_seen_per_s']}/s), age when read "
        f"p50 {ours['age_when_read_ms'].get('p50')} max {ours['age_when_read_ms'].get('max')} ms"
    )
    return envelope(
        "progress", ours, baseline, ratio(False, ours["handler_s"], baseline["handler_s"]), "sqlite", report_us=cost_us
    )


SCENARIO = Scenario("progress", "a loop reporting progress at every item vs the same loop silent", add_arguments, run)
