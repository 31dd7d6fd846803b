"""`store-work`: what one job costs the store, counted rather than timed, so the figures hold on any server
(MongoDB included, which this machine cannot time): server commands, documents written and index entries
written per job, for a one-off job, a job that fails once and then succeeds, a template's run, and a drain of
due jobs (where the claims are shared among many jobs).

The distributed stack (an API, one scheduler, one executor of the soak's job type, a reaper deleting finished
jobs a second after they end) runs on a fresh database of MONGO_URI with every process under
loadtest/store_work/recorded.py. The first three phases take one job at a time through the API (created, then
awaited in the store until it is final); the drain creates DRAIN due jobs through `POST /jobs/batch` and waits
for them. Each phase then waits until the reaper has deleted its jobs, so their deletion is part of their cost.
loadtest/store_work/accounting.py turns the commands into figures per job; index entries are counted as MongoDB
writes them (keys that changed) and as DocumentDB does (every index a new row version qualifies for). Commands
that touched no job of a phase (idle ticks, heartbeats, announcements) are background, per second.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2 as httpx
from bson import ObjectId
from pymongo import MongoClient
from pymongo.database import Database

from loadtest.benchkit import REFERENCE_ENV, Scenario, envelope, ratio, scratch_database, server_setting, store_kind
from loadtest.procs import STORE_WORK_ENV, distributed_stack, pipeline_env, wait_until
from loadtest.scenarios.due_now import warm_up
from loadtest.soak.handlers import FAIL_ATTEMPTS, SOAK_TYPE
from loadtest.store_work.accounting import Phase, account, read_records
from loadtest.store_work.indexes import Index
from shared.model import TERMINAL, utc_now
from shared.rfc3339 import format_time
from shared.store.transitions import KIND_TEMPLATE

TENANT = "store-work"
FINAL = sorted(s.value for s in TERMINAL)
WAIT_S = 120
BATCH = 1000  # POST /jobs/batch's limit
POLL_S = 0.01
PAYLOAD = {FAIL_ATTEMPTS: 0}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=50, help="jobs in each one-at-a-time phase (default 50)")
    parser.add_argument("--runs", type=int, default=20, help="template runs measured (default 20)")
    parser.add_argument("--drain", type=int, default=2000, help="due jobs in the drain phase (default 2000)")
    parser.add_argument("--records", help="keep the processes' command records (JSON lines) in this folder")


class Stage:
    """The stack, a reader of the store (not recorded) and the phases measured so far."""

    def __init__(self, base_url: str, uri: str, database: str) -> None:
        self.http = httpx.Client(base_url=base_url, timeout=30)
        self.client: MongoClient[dict[str, Any]] = MongoClient(uri)
        self.store: Database[dict[str, Any]] = self.client[database]
        self.phases: list[Phase] = []
        self.shared_by: set[str] = set()  # jobs whose work their phase's jobs share (a template)

    def close(self) -> None:
        self.http.close()
        self.client.close()

    def measure(self, name: str, body: Callable[[], set[str]]) -> None:
        started = time.time()
        jobs = body()
        kept = {"_id": {"$in": self.object_ids(jobs)}, "kind": {"$ne": KIND_TEMPLATE}}  # retention keeps templates
        self.wait(lambda: self.store.jobs.count_documents(kept) == 0, "deleted")
        self.phases.append(Phase(name, jobs, started, time.time(), counted=len(jobs - self.shared_by)))
        print(f"{name}: {len(jobs)} jobs measured", flush=True)

    def object_ids(self, jobs: set[str]) -> list[ObjectId]:
        return [ObjectId(j) for j in jobs]

    def wait(self, done: Callable[[], bool], what: str) -> None:
        wait_until(done, WAIT_S, f"the jobs to be {what}", interval_s=POLL_S)

    def final(self, job_id: str) -> bool:
        doc = self.store.jobs.find_one({"_id": ObjectId(job_id)}, {"status": 1})
        return doc is None or doc["status"] in FINAL

    def create(self, **fields: Any) -> str:
        body = {"idempotencyKey": uuid.uuid4().hex, "tenantId": TENANT, "jobType": SOAK_TYPE, **fields}
        response = self.http.post("/jobs", json=body)
        response.raise_for_status()
        return str(response.json()["id"])

    def one_at_a_time(self, n: int, fail_attempts: int) -> set[str]:
        jobs = set()
        for _ in range(n):
            job = self.create(payload={FAIL_ATTEMPTS: fail_attempts}, scheduledAt=format_time(utc_now()))
            self.wait(lambda job=job: self.final(job), "final")  # type: ignore[misc]
            jobs.add(job)
        return jobs

    def template_runs(self, runs: int) -> set[str]:
        """The template's first `runs` runs, each followed from its creation (retention deletes a finished one
        within seconds); the template's own writes are shared among them."""
        template = self.create(payload=PAYLOAD, interval="1s")
        seen: set[str] = set()

        def ran() -> bool:
            seen.update(str(d["_id"]) for d in self.store.jobs.find({"templateId": template}, {"_id": 1}))
            return sum(self.final(j) for j in seen) >= runs

        self.wait(ran, "run")
        self.http.delete(f"/jobs/{template}").raise_for_status()
        ran()
        self.wait(lambda: all(self.final(j) for j in seen), "final")
        self.shared_by.add(template)
        return {template, *seen}

    def drain(self, n: int) -> set[str]:
        jobs: set[str] = set()
        now = format_time(utc_now())
        for start in range(0, n, BATCH):
            body = {
                "tenantId": TENANT,
                "jobs": [
                    {
                        "idempotencyKey": uuid.uuid4().hex,
                        "jobType": SOAK_TYPE,
                        "payload": {FAIL_ATTEMPTS: 0},
                        "scheduledAt": now,
                    }
                    for _ in range(min(BATCH, n - start))
                ],
            }
            response = self.http.post("/jobs/batch", json=body)
            response.raise_for_status()
            jobs |= {str(r["id"]) for r in response.json()["results"]}
        ids = self.object_ids(jobs)
        self.wait(
            lambda: self.store.jobs.count_documents({"_id": {"$in": ids}, "status": {"$nin": FINAL}}) == 0, "final"
        )
        return jobs


def run(args: argparse.Namespace) -> dict[str, Any]:
    ours = measured(args, {}, "jobsched", full=True)
    baseline = measured(args, REFERENCE_ENV, "reference", full=False)
    print("jobsched:")
    print_table(ours)
    print("the reference design (one findOneAndUpdate per job claims it), same run:")
    print_table(baseline)
    drained, reference = ours["drain"]["write_commands"], baseline["drain"]["write_commands"]
    store = store_kind(server_setting("MONGO_URI"))
    return envelope("store-work", ours, baseline, ratio(False, drained, reference), store)


def measured(args: argparse.Namespace, setting: dict[str, str], label: str, *, full: bool) -> dict[str, dict[str, Any]]:
    """The phases on a stack of `setting` (only the drain unless `full`): figures per job, by phase."""
    uri, brokers = server_setting("MONGO_URI"), server_setting("KAFKA_BROKERS")
    with tempfile.TemporaryDirectory(prefix="store-work-") as scratch, scratch_database(uri) as database:
        folder = Path(args.records, label) if args.records else Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        settings = {
            **setting,
            STORE_WORK_ENV: str(folder),
            "JOBSCHED_HANDLERS": "loadtest.soak.handlers",
            "RETAIN_COMPLETED": "1s",
            "RETAIN_CANCELLED": "1s",
            "RETAIN_DLQ": "1s",
            "REAPER_INTERVAL": "1s",
        }
        env = pipeline_env(uri, brokers, database, settings)
        with distributed_stack(env, schedulers=1, executors=[SOAK_TYPE], reaper=True) as stack:
            warm_up(stack.base_url, SOAK_TYPE)
            stage = Stage(stack.base_url, uri, database)
            try:
                if full:
                    stage.measure("one-off", lambda: stage.one_at_a_time(args.jobs, 0))
                    stage.measure("fails once", lambda: stage.one_at_a_time(args.jobs, 1))
                    stage.measure("template run", lambda: stage.template_runs(args.runs))
                stage.measure("drain", lambda: stage.drain(args.drain))
                indexes = {
                    name: [Index.from_spec(dict(spec)) for spec in stage.store[name].list_indexes()]
                    for name in stage.store.list_collection_names()
                }
            finally:
                stage.close()
        work = account(read_records(folder), indexes, stage.phases)
    return {name: w.per_job() for name, w in work.items()}


def print_table(figures: dict[str, dict[str, Any]]) -> None:
    columns = ("writes", 8), ("reads", 8), ("docs", 7), ("deleted", 8), ("entries: MongoDB", 18), ("DocumentDB", 12)
    print(f"{'per job':<14}" + "".join(f"{title:>{width}}" for title, width in columns))
    for name, f in figures.items():
        print(
            f"{name:<14}{f['write_commands']:>8}{f['read_commands']:>8}{f['documents_written']:>7}"
            f"{f['documents_deleted']:>8}{f['index_entries_mongodb']:>18}{f['index_entries_documentdb']:>12}"
        )
        print(f"    writes by process {f['write_commands_by_role']}; reads {f['read_commands_by_role']}")
        print(
            f"    documents by collection {f['documents_written_by_collection']}; DocumentDB entries "
            f"{f['index_entries_documentdb_by_collection']}; background {f['background_commands_per_s']} commands/s"
        )


SCENARIO = Scenario(
    "store-work",
    "store commands, documents and index entries written per job (one-off, retried, template run, drain)",
    add_arguments,
    run,
)
