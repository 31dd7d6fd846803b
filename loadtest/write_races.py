"""Concurrent writes on the MongoDB-compatible server: what the store's own write paths meet, beside the
reference design's claim raced the same way. It counts, it does not time.

    .venv/bin/python -m loadtest.write_races [--jobs 2000] [--threads 8]

Against MONGO_URI (`make servers-up`), each part on a scratch database of its own:
- `store`: THREADS store instances (schedulers and executors at once) each claim batches of 7 due jobs, start
  and finish what they won, until nothing is due;
- `sorted-find-and-modify`: THREADS clients take the same number of due jobs with one find_one_and_update in
  claim order each (loadtest/reference.py's claim);
- `schema-upgrade`: TRIALS times, THREADS replicas create the schema at once on a database of the layout before
  per-tenant keys (one drops its global unique index), without and then with ensure_schema's retry of
  deadlocks (shared/store/deadlocks.py).
Each part prints how many jobs were taken, how many more than once (or how many replicas succeeded), and every
server error by code and message. FerretDB 2 answers some concurrent commands with PostgreSQL deadlocks
(docs/ferretdb.md has the figures); this shows which of jobsched's writes meet them.
"""

from __future__ import annotations

import argparse
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from pymongo.errors import OperationFailure

from loadtest.benchkit import drop_database, scratch_database, seed_due_jobs, server_setting, unique_name
from loadtest.reference import MongoClaimNext
from shared.model import Job, Outcome, utc_now
from shared.store.base import AttemptResult, AttemptStart, AttemptTaken, StartHint, TransitionRefused, only_answer
from shared.store.mongo import MongoJobStore, schema

LEASE = timedelta(minutes=5)
BATCH = 7

Errors = Counter[tuple[str, int | None, str]]


def store_worker(uri: str, database: str, worker: str, taken: Counter[str], errors: Errors) -> Callable[[], None]:
    """Claim, start and finish until nothing is due, as one scheduler and its executor would."""

    def run() -> None:
        store = MongoJobStore.connect(uri, database)
        try:
            while True:
                try:
                    claimed = store.claim_due_jobs(utc_now(), BATCH, {"noop"})
                except OperationFailure as exc:
                    errors[("claim", exc.code, str(exc)[:60])] += 1
                    continue
                if not claimed:
                    return
                for job in claimed:
                    taken[job.id] += 1
                    run_attempt(store, job, worker, errors)
        finally:
            store.close()

    return run


def run_attempt(store: MongoJobStore, job: Job, worker: str, errors: Errors) -> None:
    try:
        hint = StartHint(job.claimToken or "", job.next_attempt)
        started = only_answer(
            store.start_attempts([AttemptStart(job.id, job.jobType, worker, utc_now() + LEASE, hint)])
        )
        now = utc_now()
        store.finish_attempt(started, AttemptResult(Outcome.SUCCEEDED, startedAt=now, finishedAt=now))
    except (AttemptTaken, TransitionRefused):
        pass
    except OperationFailure as exc:
        errors[("start/finish", exc.code, str(exc)[:60])] += 1


def sorted_claimer(uri: str, database: str, taken: Counter[str], errors: Errors) -> Callable[[], None]:
    """Take due jobs one find_one_and_update in claim order at a time until none is left."""

    def run() -> None:
        claim_next = MongoClaimNext(uri, database)
        try:
            while True:
                try:
                    job = claim_next(utc_now(), {"noop"})
                except OperationFailure as exc:
                    errors[("claim", exc.code, str(exc)[:60])] += 1
                    continue
                if job is None:
                    return
                taken[job.id] += 1
        finally:
            claim_next.close()

    return run


def race(
    name: str, uri: str, jobs: int, threads: int, make: Callable[[str, str, Counter[str], Errors], Callable[[], None]]
) -> Errors:
    taken: Counter[str] = Counter()
    errors: Errors = Counter()
    with scratch_database(uri) as database:
        seed_due_jobs(uri, database, jobs)
        runners = [threading.Thread(target=make(database, f"w{n}", taken, errors)) for n in range(threads)]
        for runner in runners:
            runner.start()
        for runner in runners:
            runner.join()
    twice = sum(1 for count in taken.values() if count > 1)
    print(f"{name}: {len(taken)} of {jobs} jobs taken, {twice} more than once, {sum(errors.values())} errors")
    show(errors)
    return errors


def schema_upgrades(uri: str, replicas: int, trials: int, retried: bool) -> Errors:
    """Replicas upgrading a database of the old layout at once, each trial on a fresh one."""
    errors: Errors = Counter()
    done = sum(upgrade_once(uri, replicas, retried, errors) for _ in range(trials))
    name = "schema-upgrade, " + ("ensure_schema" if retried else "without the retry")
    print(f"{name}: {done} of {replicas * trials} replicas succeeded, {sum(errors.values())} errors")
    show(errors)
    return errors


def upgrade_once(uri: str, replicas: int, retried: bool, errors: Errors) -> int:
    """How many of `replicas` store instances created the schema of a fresh old-layout database at once."""
    database = unique_name("upgrade")
    stores = [MongoJobStore.connect(uri, database) for _ in range(replicas)]
    start = threading.Barrier(replicas)

    def upgrade(store: MongoJobStore) -> bool:
        start.wait()
        try:
            if retried:
                store.ensure_schema()
            else:
                schema.migrate(store.database)
        except OperationFailure as exc:
            errors[("schema", exc.code, str(exc)[:60])] += 1
            return False
        return True

    try:
        stores[0].database.jobs.create_index("idempotencyKey", unique=True, name="idempotencyKey_unique")
        with ThreadPoolExecutor(replicas) as pool:
            return sum(pool.map(upgrade, stores))
    finally:
        for store in stores:
            store.close()
        drop_database(uri, database)


def show(errors: Errors) -> None:
    for (step, code, message), count in errors.most_common():
        print(f"  {count}x {step}: code {code}: {message}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2000, help="due jobs per part (default 2000)")
    parser.add_argument("--threads", type=int, default=8, help="concurrent claimers or replicas (default 8)")
    parser.add_argument("--trials", type=int, default=10, help="schema-upgrade: fresh databases (default 10)")
    args = parser.parse_args(argv)
    uri = server_setting("MONGO_URI")
    race(
        "store",
        uri,
        args.jobs,
        args.threads,
        lambda database, worker, taken, errors: store_worker(uri, database, worker, taken, errors),
    )
    race(
        "sorted-find-and-modify",
        uri,
        args.jobs,
        args.threads,
        lambda database, _worker, taken, errors: sorted_claimer(uri, database, taken, errors),
    )
    for retried in (False, True):
        schema_upgrades(uri, args.threads, args.trials, retried)


if __name__ == "__main__":
    main()
