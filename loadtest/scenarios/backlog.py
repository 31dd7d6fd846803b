"""`backlog`: does the cost of a claim grow with the number of FUTURE jobs pending? DUE due jobs plus 1k, 10k
and 100k (SIZES) future ones; for each size: the time of one batch claim (claim_due_jobs) of DUE jobs (jobsched;
median of REPEAT) and of one claim_next (the reference's findOneAndUpdate; median of SINGLES), in ms per claim, on the
MongoDB-compatible store of MONGO_URI and on the SQLite store for comparison. Claimed jobs are released back
to pending between measurements, so every claim sees the same due set."""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pymongo import MongoClient

from loadtest.benchkit import (
    Figures,
    Scenario,
    envelope,
    ratio,
    scratch_database,
    seed_jobs,
    seed_sqlite,
    server_setting,
    store_kind,
)
from loadtest.reference import ClaimNext, MongoClaimNext, store_claim_next
from shared.backends import open_backend, sqlite_url
from shared.model import utc_now
from shared.store.base import JobStore
from shared.store.mongo.claims import due_runs_filter as claim_filter  # the exact filter of both claims

JOB_TYPES = ("noop",)
GROWS_FACTOR = 2.0  # a claim this many times slower at the largest backlog than at the smallest "grows"
Seeder = Callable[[int, Callable[[int], datetime], str], None]


def claim_times(store: JobStore, claim_next: ClaimNext, due: int, repeat: int, singles: int) -> Figures:
    """Median ms of one claim_due_jobs(limit=due) and of one claim_next."""
    now = utc_now()
    batch_ms = []
    for _ in range(repeat):
        started = time.perf_counter()
        jobs = store.claim_due_jobs(now, due, JOB_TYPES)
        batch_ms.append((time.perf_counter() - started) * 1000)
        if len(jobs) != due:
            raise RuntimeError(f"claim_due_jobs returned {len(jobs)} jobs, expected the {due} due ones")
        store.release_claims(jobs)
    single_ms = []
    claimed = []
    for _ in range(singles):
        started = time.perf_counter()
        job = claim_next(now, JOB_TYPES)
        single_ms.append((time.perf_counter() - started) * 1000)
        if job is None:
            raise RuntimeError("claim_next found no due job")
        claimed.append(job)
    store.release_claims(claimed)
    return {"claim_due_ms": statistics.median(batch_ms), "claim_next_ms": statistics.median(single_ms)}


def sweep(
    store: JobStore, claim_next: ClaimNext, seed: Seeder, sizes: list[int], due: int, repeat: int, singles: int
) -> dict[int, Figures]:
    """Seed `due` due jobs, then grow the future backlog size by size, measuring claims at each."""
    now = utc_now()
    seed(due, lambda n: now - timedelta(seconds=due - n), "due")
    future = now + timedelta(days=1)
    results: dict[int, Figures] = {}
    have = 0
    for size in sorted(sizes):
        seed(size - have, future_at(future + timedelta(seconds=have)), f"future{size}")
        have = size
        results[size] = claim_times(store, claim_next, due, repeat, singles)
    return results


def future_at(first: datetime) -> Callable[[int], datetime]:
    return lambda n: first + timedelta(seconds=n)


def mongo_sweep(uri: str, args: argparse.Namespace) -> tuple[dict[int, Figures], Figures]:
    """The sweep on MONGO_URI, and the server's plan of the claim query at the largest backlog."""
    with scratch_database(uri) as database:
        store = open_backend(uri, database=database).jobs
        claim_next = MongoClaimNext(uri, database)
        try:

            def seed(count: int, at: Callable[[int], datetime], prefix: str) -> None:
                seed_jobs(uri, database, count, at, key_prefix=prefix)

            results = sweep(store, claim_next, seed, args.sizes, args.due, args.repeat, args.singles)
            plan = claim_plan(uri, database)
        finally:
            claim_next.close()
            store.close()
    return results, plan


def claim_plan(uri: str, database: str) -> Figures:
    """What the server says about the claim query (its plan; FerretDB 1.x also said what it pushed down)."""
    client: MongoClient[dict[str, Any]] = MongoClient(uri)
    try:
        query = {
            "find": "jobs",
            "filter": claim_filter(utc_now(), JOB_TYPES),
            "sort": {"priority": -1, "scheduledAt": 1},
        }
        plan = client[database].command("explain", query)
    finally:
        client.close()
    keys = ("filterPushdown", "sortPushdown", "limitPushdown")
    planner = plan.get("queryPlanner", {})
    node = planner.get("Plan", {}).get("Node Type") or planner.get("winningPlan", {}).get("stage")
    return {"node": node, **{k: plan[k] for k in keys if k in plan}}


def sqlite_sweep(args: argparse.Namespace) -> dict[int, Figures]:
    with tempfile.TemporaryDirectory(prefix="jobsched-backlog-") as folder:
        path = Path(folder) / "jobsched.db"

        def seed(count: int, at: Callable[[int], datetime], prefix: str) -> None:
            seed_sqlite(path, count, at, prefix)

        store = open_backend(sqlite_url(os.path.abspath(path)), durable=False).jobs
        try:
            store.ensure_schema()
            return sweep(store, store_claim_next(store), seed, args.sizes, args.due, args.repeat, args.singles)
        finally:
            store.close()


def series(results: dict[int, Figures], key: str, per: int = 1) -> dict[str, float]:
    return {str(size): round(figures[key] / per, 3) for size, figures in results.items()}


def growth(values: dict[str, float]) -> float:
    ordered = list(values.values())
    return round(ordered[-1] / ordered[0], 2) if ordered[0] else float("inf")


def verdict(store: str, name: str, values: dict[str, float]) -> str:
    factor = growth(values)
    grows = "GROWS with the backlog" if factor >= GROWS_FACTOR else "does not grow much with the backlog"
    points = ", ".join(f"{v:.2f} ms at {int(k):,}" for k, v in values.items())
    return f"{store}: {name} {grows} (x{factor}: {points})"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sizes",
        type=lambda text: [int(v) for v in text.split(",")],
        default=[1_000, 10_000, 100_000],
        help="future backlog sizes, comma-separated (default 1000,10000,100000)",
    )
    parser.add_argument("--due", type=int, default=500, help="due jobs, and the claim_due batch (default 500)")
    parser.add_argument("--repeat", type=int, default=5, help="claim_due calls per size (median; default 5)")
    parser.add_argument("--singles", type=int, default=20, help="claim_next calls per size (median; default 20)")
    parser.add_argument("--no-sqlite", action="store_true", help="skip the SQLite comparison")


def run(args: argparse.Namespace) -> dict[str, Any]:
    uri = server_setting("MONGO_URI")
    store = store_kind(uri)
    results, plan = mongo_sweep(uri, args)
    ours: Figures = {
        "due": args.due,
        "claim_due_ms": series(results, "claim_due_ms"),
        "claim_due_ms_per_job": series(results, "claim_due_ms", args.due),
        "plan": plan,
    }
    baseline: Figures = {"claim_next_ms": series(results, "claim_next_ms")}
    ours["growth"] = growth(ours["claim_due_ms"])
    baseline["growth"] = growth(baseline["claim_next_ms"])
    lines = [verdict(store, "claim_due", ours["claim_due_ms"]), verdict(store, "claim_next", baseline["claim_next_ms"])]
    if not args.no_sqlite:
        on_sqlite = sqlite_sweep(args)
        ours["sqlite"] = {
            "claim_due_ms": series(on_sqlite, "claim_due_ms"),
            "claim_next_ms": series(on_sqlite, "claim_next_ms"),
        }
        lines += [verdict("sqlite", name, ours["sqlite"][f"{name}_ms"]) for name in ("claim_due", "claim_next")]
    largest = str(max(args.sizes))
    value = ratio(False, ours["claim_due_ms_per_job"][largest], baseline["claim_next_ms"][largest])
    print(f"{'future backlog':>14} {'claim_due ms':>13} {'ms/job':>8} {'claim_next ms':>14}  ({store}, {args.due} due)")
    for size in sorted(args.sizes):
        key = str(size)
        print(
            f"{size:>14,} {ours['claim_due_ms'][key]:>13.2f} {ours['claim_due_ms_per_job'][key]:>8.3f} "
            f"{baseline['claim_next_ms'][key]:>14.2f}"
        )
    print("\n".join(lines))
    print(f"claim plan: {plan}")
    print(f"ratio (claim_next ms / claim_due ms per job, at {int(largest):,}): {value}x")
    return envelope("backlog", ours, baseline, value, store, findings=lines)


SCENARIO = Scenario("backlog", "claim cost with 1k/10k/100k future jobs pending (ms per claim)", add_arguments, run)
