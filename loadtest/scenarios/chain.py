"""`chain`: LENGTH noop jobs, each waiting for the one before it (dependsOn), run by `jobsched dev` (--mode
embedded) or by the distributed stack (--mode distributed: an API, a scheduler and a noop executor as processes on
MongoDB/Kafka, the executor nudging the scheduler over UDP): how long from a parent's end to its child's start
(p50/p95/max ms), and the whole chain's time. The chain is written into the store before the processes start, its
first job parked a day ahead; once a warm-up job has run, that job is moved to due now, so the measurement sees
only the chain. A link's time is the child's attempt's start (the store's, as its record has it) minus the
parent's attempt's end (the handler's, a few ms before its commit). Peer: a Celery 5 `chain` of LENGTH tasks on
Redis, each passing its end time on to the next, which records its own start minus it. Targets (issue 50): p50
<= 20 ms embedded, <= 100 ms distributed."""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from contextlib import closing
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import celery
from bson import ObjectId

from loadtest import celery_app
from loadtest.benchkit import Figures, Scenario, envelope, ratio, scratch_database, server_setting, store_kind, target
from loadtest.celery_peer import add_celery_arguments, label, warmed_celery
from loadtest.procs import count_until, distributed_stack, pipeline_env
from loadtest.scenarios.due_now import warm_up
from loadtest.scenarios.embedded import count_status, warmed_dev
from loadtest.stats import summary
from shared.backends import open_backend, sqlite_url
from shared.model import Outcome, Status, utc_now
from shared.store.base import JobStore, NewJob
from shared.store.mongo import MongoJobStore
from shared.store.sqlite.codecs import from_ms, to_ms

KEY_PREFIX = "link"
PARKED_FOR = timedelta(days=1)
P50_GOAL_MS = 20.0
P50_GOAL_DISTRIBUTED_MS = 100.0


Spans = dict[str, tuple[datetime, datetime]]  # a job's attempt that ran: its start and its end, by job id


def write_chain(store: JobStore, length: int) -> list[str]:
    """The chain's jobs, first to last, each created waiting for the one before; the first parked ahead."""
    store.ensure_schema()
    ids: list[str] = []
    for n in range(length):
        job = store.create(
            NewJob(
                idempotencyKey=f"{KEY_PREFIX}-{n}",
                tenantId="tenant-a",
                jobType="noop",
                scheduledAt=utc_now() + PARKED_FOR if n == 0 else utc_now(),
                dependsOn=ids[-1:] or None,
            )
        )
        ids.append(job.id)
    return ids


def chain_figures(setting: str, ids: list[str], spans: Spans) -> Figures:
    """Each link's ms from the parent's end to the child's start, and the seconds from the first start to the
    last end."""
    links = [
        (spans[child][0] - spans[parent][1]).total_seconds() * 1000
        for parent, child in pairwise(ids)
        if parent in spans and child in spans
    ]
    whole = (spans[ids[-1]][1] - spans[ids[0]][0]).total_seconds() if ids[0] in spans and ids[-1] in spans else 0.0
    return {"setting": setting, "length": len(ids), "links": len(links), "link_ms": summary(links), "chain_s": whole}


def measure_embedded_chain(length: int, time_box_s: float) -> Figures:
    with tempfile.TemporaryDirectory(prefix="jobsched-chain-") as folder:
        path = Path(folder) / "jobsched.db"
        store = open_backend(sqlite_url(str(path.resolve())), durable=False).jobs
        try:
            ids = write_chain(store, length)
        finally:
            store.close()
        with warmed_dev(path) as dev:
            with closing(sqlite3.connect(path, timeout=30, isolation_level=None)) as conn:
                conn.execute("UPDATE jobs SET scheduledAt = ? WHERE id = ?", (to_ms(utc_now()), ids[0]))
            end = time.monotonic() + time_box_s
            while count_status(path, Status.COMPLETED) < length + 1 and time.monotonic() < end:
                dev.check_alive()
                time.sleep(0.05)
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            spans = {
                str(job_id): (from_ms(started), from_ms(finished))
                for job_id, started, finished in conn.execute(
                    "SELECT jobId, startedAt, finishedAt FROM executions WHERE outcome = ?", (Outcome.SUCCEEDED.value,)
                )
            }
    return chain_figures("jobsched dev", ids, spans)


def measure_distributed_chain(uri: str, brokers: str, length: int, time_box_s: float) -> Figures:
    with scratch_database(uri) as database:
        store = MongoJobStore.connect(uri, database)
        try:
            ids = write_chain(store, length)
            with distributed_stack(pipeline_env(uri, brokers, database, {})) as stack:
                warm_up(stack.base_url)
                store.database.jobs.update_one({"_id": ObjectId(ids[0])}, {"$set": {"scheduledAt": utc_now()}})
                end = time.monotonic() + time_box_s
                while (last := store.get(ids[-1])) and last.status is not Status.COMPLETED and time.monotonic() < end:
                    for service in stack.services:
                        service.check_alive()
                    time.sleep(0.05)
            docs = store.database.jobs.find({"_id": {"$in": [ObjectId(i) for i in ids]}}, {"history": 1})
            spans = {
                str(doc["_id"]): (entry["startedAt"], entry["finishedAt"])
                for doc in docs
                for entry in doc.get("history") or []
                if entry["outcome"] == Outcome.SUCCEEDED.value
            }
        finally:
            store.close()
    return chain_figures("jobsched distributed (API, scheduler, noop executor)", ids, spans)


def measure_celery_chain(length: int, pool: str, concurrency: int, time_box_s: float) -> Figures:
    with warmed_celery(pool, concurrency) as (app, reports):
        celery.chain(*[app.signature("peer.link") for _ in range(length)]).apply_async()
        count_until(lambda: int(reports.get(celery_app.RUNS_KEY) or 0), length + 1, time.monotonic(), time_box_s)
        delays = [float(v) for v in reports.lrange(celery_app.DELAYS_KEY, 0, -1)]
        spans = [[float(t) for t in v.split()] for v in reports.lrange(celery_app.SPANS_KEY, 0, -1)]
    whole = max(end for _, end in spans) - min(start for start, _ in spans) if spans else 0.0
    return {
        "setting": label(pool, concurrency) + ", celery.chain",
        "length": length,
        "links": len(delays),
        "link_ms": summary(delays),
        "chain_s": round(whole, 3),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mode", choices=("embedded", "distributed"), default="embedded")
    parser.add_argument("--length", type=int, default=100, help="jobs in the chain (default 100)")
    parser.add_argument("--time-box", type=float, default=120.0, help="seconds allowed for each chain (default 120)")
    add_celery_arguments(parser)


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.mode == "embedded":
        ours, store, goal_ms = measure_embedded_chain(args.length, args.time_box), "sqlite", P50_GOAL_MS
    else:
        uri, brokers = server_setting("MONGO_URI"), server_setting("KAFKA_BROKERS")
        ours = measure_distributed_chain(uri, brokers, args.length, args.time_box)
        store, goal_ms = store_kind(uri), P50_GOAL_DISTRIBUTED_MS
    peer = measure_celery_chain(args.length, args.pool, args.concurrency, args.time_box)
    value = ratio(False, ours["link_ms"]["p50"], peer["link_ms"]["p50"])
    for name, figures in ((ours["setting"], ours), (peer["setting"], peer)):
        q = figures["link_ms"]
        print(
            f"{name:<80} parent end → child start p50 {q['p50']:6.1f} p95 {q['p95']:6.1f} max {q['max']:6.1f} ms; "
            f"{figures['links']} links, the chain in {figures['chain_s']:.2f} s"
        )
    met = ours["links"] == args.length - 1 and ours["link_ms"]["p50"] <= goal_ms
    print(f"ratio (Celery p50 / jobsched p50): {value:.2f}x; target p50 <= {goal_ms:g} ms, every link ran: {met}")
    targets = {"link": target(f"p50 <= {goal_ms:g} ms over a chain of {args.length}", ours["link_ms"]["p50"], met)}
    return envelope("chain", ours, peer, value, store, mode=args.mode, targets=targets)


SCENARIO = Scenario(
    "chain", "a chain of jobs in `jobsched dev`: parent end → child start vs a Celery chain", add_arguments, run
)
