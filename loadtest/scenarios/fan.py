"""`fan`: fan-out and fan-in in `jobsched dev` (issue 50's targets), three runs on fresh SQLite files:
1. WIDTH independent noop jobs, written parked and made due at once: their drain, from the first attempt's start
   to the last one's end;
2. the same WIDTH jobs as a fan: a root, WIDTH members each waiting for it (dependsOn) in a batch, and the batch's
   onSuccess callback (the fan-in): from the root's start to the callback's end. Target: at most 1.2 times run 1;
3. a batch of MEMBERS independent noop members (100,000 by default) with an onComplete callback: from the last
   member's end to the callback's start. Target: at most 1 s.
Every time is the store's, from the attempts' records. What each member writes beyond an independent job: its
release (one update of its row, in the root's end's transaction). It waits in its own row (`waitingOn`, the one
parent it waits for): its rows in `job_dependencies` are counted from the file, and there are none; a batch's own
check at a member's end is a read (one index probe), not a write."""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from loadtest.benchkit import Figures, Scenario, envelope, target
from loadtest.scenarios.embedded import count_status, warmed_dev
from shared.backends import open_backend, sqlite_url
from shared.model import Outcome, Status, utc_now
from shared.store.base import JobStore, NewBatch, NewJob
from shared.store.sqlite.codecs import from_ms, to_ms

PARKED_FOR = timedelta(days=1)
FAN_GOAL = 1.2
CALLBACK_GOAL_MS = 1000.0
ADDED_PER_CALL = 1000


def _job(key: str, parked: bool, **fields: Any) -> NewJob:
    due = utc_now() + PARKED_FOR if parked else utc_now()
    return NewJob(idempotencyKey=key, tenantId="tenant-a", jobType="noop", scheduledAt=due, **fields)


@contextmanager
def _file(write: Callable[[JobStore], list[str]]) -> Iterator[tuple[Path, list[str]]]:
    """A fresh SQLite file holding what `write` stores: its path, and the ids of the jobs to make due."""
    with tempfile.TemporaryDirectory(prefix="jobsched-fan-") as folder:
        path = Path(folder) / "jobsched.db"
        store = open_backend(sqlite_url(str(path.resolve())), durable=False).jobs
        try:
            store.ensure_schema()
            due = write(store)
        finally:
            store.close()
        yield path, due


def _run(path: Path, due: list[str], completed: int, time_box_s: float) -> dict[str, tuple[float, float]]:
    """`jobsched dev` on the file, the `due` jobs made due once it is warm, until `completed` jobs are (beside the
    warm-up): each succeeded attempt's start and end (s), by job id."""
    with warmed_dev(path) as dev:
        with closing(sqlite3.connect(path, timeout=30, isolation_level=None)) as conn:
            for start in range(0, len(due), 500):
                chunk = due[start : start + 500]
                marks = ", ".join("?" * len(chunk))
                conn.execute(f"UPDATE jobs SET scheduledAt = ? WHERE id IN ({marks})", (to_ms(utc_now()), *chunk))
        end = time.monotonic() + time_box_s
        while count_status(path, Status.COMPLETED) < completed + 1 and time.monotonic() < end:
            dev.check_alive()
            time.sleep(0.05)
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        rows = conn.execute(
            "SELECT jobId, startedAt, finishedAt FROM executions WHERE outcome = ?", (Outcome.SUCCEEDED.value,)
        )
        return {str(j): (from_ms(s).timestamp(), from_ms(f).timestamp()) for j, s, f in rows}


def independent(width: int, time_box_s: float) -> Figures:
    def write(store: JobStore) -> list[str]:
        made = []
        for start in range(0, width, ADDED_PER_CALL):
            chunk = [_job(f"ind-{n}", True) for n in range(start, min(start + ADDED_PER_CALL, width))]
            made += [job.id for job in store.create_many(chunk) if not isinstance(job, Exception)]
        return made

    with _file(write) as (path, ids):
        spans = _run(path, ids, width, time_box_s)
    ran = [spans[i] for i in ids if i in spans]
    whole = max(e for _, e in ran) - min(s for s, _ in ran) if ran else 0.0
    return {"jobs": width, "ran": len(ran), "drain_s": round(whole, 3)}


def fan(width: int, time_box_s: float) -> Figures:
    state: dict[str, Any] = {}

    def write(store: JobStore) -> list[str]:
        root = store.create(_job("root", True))
        batch = store.create_batch(NewBatch("tenant-a", "fan", onSuccess=_job("fan-in", False))).batch
        for start in range(0, width, ADDED_PER_CALL):
            chunk = [
                _job(f"m-{n}", False, dependsOn=[root.id]) for n in range(start, min(start + ADDED_PER_CALL, width))
            ]
            store.add_to_batch(batch.id, chunk)
        store.seal_batch(batch.id)
        state.update(root=root.id, sink=batch.onSuccess, batch=batch.id)
        return [root.id]

    with _file(write) as (path, _):
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            links = int(conn.execute("SELECT count(*) FROM job_dependencies").fetchone()[0])
        spans = _run(path, [state["root"]], width + 2, time_box_s)
    root, sink = spans.get(state["root"]), spans.get(state["sink"])
    whole = sink[1] - root[0] if root and sink else 0.0
    return {
        "jobs": width + 2,
        "ran": len(spans) - 1,  # the warm-up job aside
        "fan_s": round(whole, 3),
        "dependency_rows_per_member": round(links / width, 3),
    }


def callback_delay(members: int, time_box_s: float) -> Figures:
    state: dict[str, Any] = {}

    def write(store: JobStore) -> list[str]:
        batch = store.create_batch(NewBatch("tenant-a", "wide", onComplete=_job("callback", False))).batch
        ids: list[str] = []
        for start in range(0, members, ADDED_PER_CALL):
            chunk = [_job(f"w-{n}", True) for n in range(start, min(start + ADDED_PER_CALL, members))]
            ids += [j.id for j in store.add_to_batch(batch.id, chunk) if not isinstance(j, Exception)]
        store.seal_batch(batch.id)
        state.update(callback=batch.onComplete, members=ids)
        return ids

    with _file(write) as (path, ids):
        spans = _run(path, ids, members + 1, time_box_s)
    last_end = max((spans[i][1] for i in ids if i in spans), default=0.0)
    callback = spans.get(state["callback"])
    delay_ms = (callback[0] - last_end) * 1000 if callback else float("nan")
    return {"members": members, "ran": sum(1 for i in ids if i in spans), "callback_ms": round(delay_ms, 1)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--width", type=int, default=10_000, help="jobs of the fan-out (default 10,000)")
    parser.add_argument("--members", type=int, default=100_000, help="members of the batch (default 100,000)")
    parser.add_argument("--time-box", type=float, default=300.0, help="seconds allowed for each run (default 300)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    alone = independent(args.width, args.time_box)
    fanned = fan(args.width, args.time_box)
    wide = callback_delay(args.members, args.time_box)
    value = round(fanned["fan_s"] / alone["drain_s"], 3) if alone["drain_s"] else float("nan")
    print(f"{args.width} independent jobs drained in {alone['drain_s']:.2f} s ({alone['ran']} ran)")
    print(
        f"1 → {args.width} → 1 (dependsOn a root, a batch's onSuccess): {fanned['fan_s']:.2f} s ({fanned['ran']} ran),"
        f" {value:.2f}x the independent drain; {fanned['dependency_rows_per_member']} dependency rows per member"
    )
    print(f"a batch of {wide['members']}: callback started {wide['callback_ms']:.1f} ms after the last member's end")
    fan_met = fanned["ran"] == args.width + 2 and value <= FAN_GOAL
    callback_met = wide["ran"] == args.members and wide["callback_ms"] <= CALLBACK_GOAL_MS
    targets = {
        "fan": target(f"1 → {args.width} → 1 within {FAN_GOAL}x the drain of {args.width} jobs", value, fan_met),
        "callback": target(f"callback of {args.members} within 1 s", wide["callback_ms"], callback_met),
    }
    ours = {"setting": "jobsched dev", "independent": alone, "fan": fanned, "batch": wide}
    return envelope("fan", ours, alone, value, "sqlite", targets=targets)


SCENARIO = Scenario(
    "fan",
    "fan-out/fan-in and a wide batch's callback in `jobsched dev`, beside the same jobs' drain",
    add_arguments,
    run,
)
