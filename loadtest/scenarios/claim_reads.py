"""`claim-reads`: what the distributed claim's reads cost on the MongoDB-compatible server as the backlog grows
(issue 49's hot second). For each backlog size, that many due noop runs of TENANTS tenants (one type, due over
the last hour) are written into a fresh database with the store's schema and indexes; then, REPEAT times each and
interleaved, the reads a claim makes: its list of lanes (the tenants with due runs: claims.due_tenants, one
`distinct`) and one lane's read of 1 and of 64 runs in claim order (claims.lane_runs); every lane's first
READ_AHEAD_RUNS runs in one read (claims.read_lanes: how a claim meets new lanes on DocumentDB); and, for
comparison, the same `distinct` over the runs due in the last RECENT seconds only. Figures: the median ms of
each, and each size's over the smallest's (the baseline, same run). A claim of 64 runs over 100 tenants makes one
`distinct` and up to 64 lane reads of one run. On MongoDB both reads follow the entries they return; on
DocumentDB (FerretDB 2) an index's terms are kept per path, so the due bound walks every due run of the type."""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any

from loadtest.benchkit import (
    Figures,
    Scenario,
    envelope,
    ratio,
    scratch_database,
    seed_jobs,
    server_setting,
    store_kind,
)
from shared.backends import open_backend
from shared.model import utc_now
from shared.store.mongo import MongoJobStore
from shared.store.mongo.claims import due_lane, due_tenants, lane_runs, read_lanes
from shared.store.mongo.read_ahead import READ_AHEAD_RUNS

TENANTS = 100
JOB_TYPE = "noop"
LANE_READS = (1, 64)
# The tenants of the runs that fell due in this last stretch only: what a claim that kept its list of lanes from
# one full listing to the next would ask (an experiment's figure, not a read claims.py makes).
RECENT = timedelta(seconds=5)


def timed_reads(uri: str, size: int, repeat: int) -> Figures:
    with scratch_database(uri) as name:
        now = utc_now()
        seed_jobs(uri, name, size, lambda n: now - timedelta(hours=1) * ((size - n) / size), tenants=TENANTS)
        store = open_backend(uri, database=name).jobs
        assert isinstance(store, MongoJobStore), "claim-reads measures the MongoDB store"
        try:
            database, due = store.database, utc_now()
            tenants = due_tenants(database, JOB_TYPE, due)
            tenant = tenants[0]
            lane = due_lane(JOB_TYPE, tenant, due)
            recent = {**due_lane(JOB_TYPE, None, due), "scheduledAt": {"$gt": due - RECENT, "$lte": due}}
            reads: dict[str, Callable[[], Any]] = {
                "lanes_ms": lambda: due_tenants(database, JOB_TYPE, due),
                "recent_lanes_ms": lambda: database.jobs.distinct("tenantId", recent),
                "lanes_together_ms": partial(read_lanes, database, JOB_TYPE, tenants, due, READ_AHEAD_RUNS),
            }
            for n in LANE_READS:
                reads[f"lane_read_{n}_ms"] = partial(lane_runs, database, lane, set(), None, n)
            times: dict[str, list[float]] = {key: [] for key in reads}
            for _ in range(repeat):
                for key, read in reads.items():
                    started = time.perf_counter()
                    read()
                    times[key].append((time.perf_counter() - started) * 1000)
            lane_size = database.jobs.count_documents(lane)
        finally:
            store.close()
    return {"due_runs": size, "lane_runs": lane_size} | {k: round(statistics.median(v), 2) for k, v in times.items()}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", default="10000,60000", help="backlogs of due runs, comma-separated")
    parser.add_argument("--repeat", type=int, default=21, help="times each read is made per size (default 21)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    uri = server_setting("MONGO_URI")
    sizes = sorted(int(s) for s in args.sizes.split(","))
    measured = [timed_reads(uri, size, args.repeat) for size in sizes]
    smallest, largest = measured[0], measured[-1]
    for figures in measured:
        growth = {key: round(figures[key] / smallest[key], 2) for key in figures if key.endswith("_ms")}
        figures["times_the_smallest"] = growth
        print(
            f"{figures['due_runs']} due runs of {TENANTS} tenants (a lane of {figures['lane_runs']}): lanes "
            f"(distinct) {figures['lanes_ms']} ms (of the last {RECENT.seconds} s' runs: "
            f"{figures['recent_lanes_ms']} ms), a lane's read of 1 {figures['lane_read_1_ms']} ms, of 64 "
            f"{figures['lane_read_64_ms']} ms; every lane's first {READ_AHEAD_RUNS} in one read "
            f"{figures['lanes_together_ms']} ms (one by one: {TENANTS} reads); times those of "
            f"{smallest['due_runs']}: {growth}"
        )
    # ratio > 1: the largest backlog's lane read is no dearer than the smallest's
    held_up = ratio(False, largest["lane_read_1_ms"], smallest["lane_read_1_ms"])
    return envelope("claim-reads", largest, smallest, held_up, store_kind(uri), sizes=measured)


SCENARIO = Scenario("claim-reads", "the claim's lane list and lane reads as the backlog grows", add_arguments, run)
