"""Compare FerretDB's SQLite and PostgreSQL backends on the scheduler's hot path.

    .venv/bin/python -m loadtest.ferretdb_backends                 # starts each backend itself, prints a table
    .venv/bin/python -m loadtest.ferretdb_backends --uri mongodb://127.0.0.1:27018/?directConnection=true

Without --uri, each backend is started by deployments/local/ferretdb.sh on a private port and run dir
(FERRETDB_PORT=27118, POSTGRES_PORT=15532, a temporary JOBSCHED_RUN_DIR) and cleaned afterwards, so a
FerretDB already running on the default port is left alone. Traffic goes to 127.0.0.1 only.

Measured, on a collection with the scheduler's indexes (unique idempotencyKey; status/priority/scheduledAt;
tenantId/createdAt/status):
  (a) inserts: insert_one per job, and insert_many in batches of 500;
  (b) claims: batch mode (find pending+due, sorted by priority desc/scheduledAt asc, limit 500, then
      update_many {_id: {$in: ids}, status: pending} -> queued, until drained), and single-document mode
      (find_one_and_update with the same filter and sort, return_document=AFTER);
  (c) find_one by _id latency.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pymongo import ASCENDING, DESCENDING, MongoClient, ReturnDocument
from pymongo.collection import Collection
from pymongo.database import Database

Doc = dict[str, Any]

REPO_ROOT = Path(__file__).resolve().parent.parent
FERRETDB_SH = REPO_ROOT / "deployments" / "local" / "ferretdb.sh"
BACKENDS = ("sqlite", "postgresql")
BATCH = 500
CLAIM_SORT: list[tuple[str, int]] = [("priority", DESCENDING), ("scheduledAt", ASCENDING)]


@dataclass
class Result:
    backend: str
    rates: dict[str, float] = field(default_factory=dict)  # jobs/s (or ops/s)
    latency_ms: dict[str, float] = field(default_factory=dict)


def make_jobs(n: int, prefix: str, rng: random.Random) -> list[Doc]:
    now = datetime.now(UTC)
    return [
        {
            "idempotencyKey": f"{prefix}-{i}",
            "tenantId": f"tenant-{rng.randrange(20)}",
            "jobType": rng.choice(["email", "report", "resize", "webhook"]),
            "payload": {"n": i, "args": [rng.random() for _ in range(4)], "note": "x" * 200},
            "priority": rng.randrange(10),
            "status": "pending",
            "scheduledAt": now - timedelta(seconds=rng.randrange(1, 3600)),
            "createdAt": now,
        }
        for i in range(n)
    ]


def fresh_collection(db: Database[Doc], name: str) -> Collection[Doc]:
    db.drop_collection(name)
    coll = db[name]
    coll.create_index([("idempotencyKey", ASCENDING)], unique=True)
    coll.create_index([("status", ASCENDING), ("priority", DESCENDING), ("scheduledAt", ASCENDING)])
    coll.create_index([("tenantId", ASCENDING), ("createdAt", DESCENDING), ("status", ASCENDING)])
    return coll


def timed(fn: Callable[[], int]) -> tuple[int, float]:
    t0 = time.perf_counter()
    count = fn()
    return count, time.perf_counter() - t0


def due_filter() -> Doc:
    return {"status": "pending", "scheduledAt": {"$lte": datetime.now(UTC)}}


def claim_batches(coll: Collection[Doc]) -> int:
    claimed = 0
    while True:
        ids = [d["_id"] for d in coll.find(due_filter(), {"_id": 1}).sort(CLAIM_SORT).limit(BATCH)]
        if not ids:
            return claimed
        res = coll.update_many({"_id": {"$in": ids}, "status": "pending"}, {"$set": {"status": "queued"}})
        claimed += res.modified_count


def claim_singles(coll: Collection[Doc], n: int) -> int:
    claimed = 0
    for _ in range(n):
        doc = coll.find_one_and_update(
            due_filter(), {"$set": {"status": "queued"}}, sort=CLAIM_SORT, return_document=ReturnDocument.AFTER
        )
        if doc is None:
            break
        claimed += 1
    return claimed


def run_benchmark(uri: str, backend: str, n: int, singles: int, lookups: int) -> Result:
    rng = random.Random(42)
    result = Result(backend)
    client: MongoClient[Doc] = MongoClient(uri, serverSelectionTimeoutMS=5000)
    try:
        db = client["bench_ferretdb_backends"]
        client.drop_database(db.name)

        one = fresh_collection(db, "jobs_one")
        docs = make_jobs(n, "one", rng)
        count, secs = timed(lambda: sum(1 for d in docs if one.insert_one(d).acknowledged))
        result.rates["insert_one"] = count / secs

        many = fresh_collection(db, "jobs_many")
        docs = make_jobs(n, "many", rng)
        count, secs = timed(
            lambda: sum(len(many.insert_many(docs[i : i + BATCH]).inserted_ids) for i in range(0, n, BATCH))
        )
        result.rates[f"insert_many/{BATCH}"] = count / secs

        count, secs = timed(lambda: claim_batches(many))
        assert count == n, f"batch claim drained {count} of {n}"
        result.rates[f"claim batch/{BATCH}"] = count / secs

        count, secs = timed(lambda: claim_singles(one, singles))
        assert count == singles, f"single claim got {count} of {singles}"
        result.rates["claim find_one_and_update"] = count / secs

        ids = [d["_id"] for d in many.find({}, {"_id": 1})]
        samples: list[float] = []
        for oid in rng.sample(ids, min(lookups, len(ids))):
            t0 = time.perf_counter()
            assert many.find_one({"_id": oid}) is not None
            samples.append((time.perf_counter() - t0) * 1000)
        result.rates["find_one by _id"] = len(samples) / (sum(samples) / 1000)
        result.latency_ms["find_one by _id p50"] = statistics.median(samples)
        result.latency_ms["find_one by _id p99"] = statistics.quantiles(samples, n=100)[98]

        client.drop_database(db.name)
    finally:
        client.close()
    return result


@contextmanager
def ferretdb(backend: str, run_dir: Path, port: int, pg_port: int) -> Iterator[str]:
    env = os.environ | {
        "FERRETDB_BACKEND": backend,
        "FERRETDB_PORT": str(port),
        "POSTGRES_PORT": str(pg_port),
        "JOBSCHED_RUN_DIR": str(run_dir),
    }
    subprocess.run(["bash", str(FERRETDB_SH), "start"], env=env, check=True)
    try:
        yield f"mongodb://127.0.0.1:{port}/?directConnection=true"
    finally:
        subprocess.run(["bash", str(FERRETDB_SH), "clean"], env=env, check=False)


def print_table(results: list[Result]) -> None:
    keys = list(dict.fromkeys(k for r in results for k in r.rates))
    lat = list(dict.fromkeys(k for r in results for k in r.latency_ms))
    width = max(len(k) for k in [*keys, *lat]) + 2
    print("".ljust(width) + "".join(r.backend.rjust(14) for r in results))
    for k in keys:
        print(f"{k + ' /s':<{width}}" + "".join(f"{r.rates.get(k, float('nan')):14.0f}" for r in results))
    for k in lat:
        print(f"{k + ' ms':<{width}}" + "".join(f"{r.latency_ms.get(k, float('nan')):14.2f}" for r in results))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--uri", help="benchmark this running server instead of starting the backends")
    p.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    p.add_argument("--jobs", type=int, default=5000, help="jobs per collection (default 5000)")
    p.add_argument("--singles", type=int, default=1000, help="find_one_and_update claims (default 1000)")
    p.add_argument("--lookups", type=int, default=1000, help="find_one by _id samples (default 1000)")
    p.add_argument("--port", type=int, default=27118)
    p.add_argument("--pg-port", type=int, default=15532)
    args = p.parse_args(argv)

    results: list[Result] = []
    if args.uri:
        results.append(run_benchmark(args.uri, "given", args.jobs, args.singles, args.lookups))
    else:
        for backend in args.backends:
            with (
                tempfile.TemporaryDirectory(prefix="ferretdb-bench-") as tmp,
                ferretdb(backend, Path(tmp), args.port, args.pg_port) as uri,
            ):
                print(f"--- {backend}: {args.jobs} jobs ...", file=sys.stderr, flush=True)
                results.append(run_benchmark(uri, backend, args.jobs, args.singles, args.lookups))
    print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
