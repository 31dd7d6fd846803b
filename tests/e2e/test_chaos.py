"""Chaos: 2,000 jobs through real processes while executors, the leader and the reaper are killed with
SIGKILL again and again and Kafka is restarted once. Nothing may be lost and no attempt may run twice at once;
`slow` runs under a concurrency limit and `flaky` under a start rate, which no crash may let them exceed. Beside
them run small graphs of jobs that wait for others (a root, three steps after it, one after all three): every step
ends, none starts before each of its parents has completed, and a dead-lettered parent cancels what waits on it;
and sealed batches with callbacks: each fires, its onComplete runs once after its last member ended, its onSuccess
only when every member completed.
"""

from __future__ import annotations

import itertools
import random
import subprocess
import time
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from bson import ObjectId
from pymongo import InsertOne
from pymongo.database import Database

from jobsched.limits import Limits, Rate
from shared.model import Outcome, Status, utc_now
from shared.store.base import NewBatch, NewJob, NewStep, NewWorkflow
from shared.store.mongo import MongoJobStore
from shared.store.mongo.job_types import MongoJobTypes
from shared.store.transitions import KIND_RUN
from tests.conftest import LOCAL_SCRIPTS, Launch
from tests.support import ServiceProcess, wait_until

JOBS = 2000
DRAIN_BOUND_S = 420
FAST_RECOVERY = {"CLAIM_TIMEOUT": "4s", "QUEUED_TIMEOUT": "4s", "REAPER_INTERVAL": "1s", "LEASE_TTL": "3s"}
EXECUTOR_TYPES = ("noop", "flaky", "slow", "slow")
SLOW_AT_ONCE = 5
FLAKY_PER_SECOND = 50
LIMITS = {"slow": Limits(concurrency=SLOW_AT_ONCE), "flaky": Limits(rate=Rate(FLAKY_PER_SECOND, per=1.0))}


def job_mix(rng: random.Random, count: int) -> list[dict[str, Any]]:
    now = utc_now()
    docs = []
    for i in range(count):
        roll = rng.random()
        if roll < 0.6:
            job_type, payload = "noop", {}
        elif roll < 0.85:
            job_type, payload = "flaky", {"failRate": 0.3}
        else:
            job_type, payload = "slow", {"sleepMs": rng.randint(100, 1500)}
        docs.append(
            {
                "idempotencyKey": f"chaos-{i}",
                "tenantId": f"tenant-{i % 5}",
                "jobType": job_type,
                "payload": payload,
                "priority": rng.randint(0, 3),
                "status": Status.PENDING.value,
                "kind": KIND_RUN,
                "attempts": 0,
                "maxAttempts": 4,
                "scheduledAt": now + timedelta(milliseconds=rng.randint(0, 20_000)),
                "createdAt": now,
                "updatedAt": now,
            }
        )
    return docs


DAGS = 60
DAG_STEPS = ("root", "a", "b", "c", "sink")


def write_dags(store: MongoJobStore, rng: random.Random) -> dict[str, list[str]]:
    """DAGS graphs root → a, b, c → sink, due within the first 20 s, of noop and flaky steps (some dead-letter),
    half of them jobs with dependsOn, half workflows: each step's parents' ids, by the step's id."""
    parents_of: dict[str, list[str]] = {}
    for n in range(DAGS):
        after = {"root": (), "a": ("root",), "b": ("root",), "c": ("root",), "sink": ("a", "b", "c")}
        steps: list[NewStep] = []
        for step in DAG_STEPS:
            flaky = rng.random() < 0.3
            new = NewJob(
                idempotencyKey=f"dag-{n}-{step}",
                tenantId=f"tenant-{n % 5}",
                jobType="flaky" if flaky else "noop",
                payload={"failRate": 0.5} if flaky else {},
                scheduledAt=utc_now() + timedelta(milliseconds=rng.randint(0, 20_000)),
                maxAttempts=2,
            )
            steps.append(NewStep(step, new, after[step]))
        if n % 2:
            view = store.create_workflow(NewWorkflow(f"tenant-{n % 5}", f"dag-{n}", tuple(steps)))
            made = {s.name: s.jobId for s in view.workflow.steps}
        else:
            made = {}
            for s in steps:
                parents = [made[p] for p in s.after]
                made[s.name] = store.create(replace(s.job, dependsOn=parents or None)).id
        for s in steps:
            parents_of[made[s.name]] = [made[p] for p in s.after]
    return parents_of


BATCHES = 10
BATCH_MEMBERS = 12


def write_batches(store: MongoJobStore, rng: random.Random) -> list[str]:
    """BATCHES sealed batches of BATCH_MEMBERS noop and flaky members (some dead-letter) due within the first 20 s,
    each with an onComplete and an onSuccess callback: their ids."""
    made: list[str] = []
    for n in range(BATCHES):
        tenant = f"tenant-{n % 5}"

        def job(key: str, flaky: bool = False) -> NewJob:
            return NewJob(
                idempotencyKey=key,
                tenantId=tenant,  # noqa: B023
                jobType="flaky" if flaky else "noop",
                payload={"failRate": 0.5} if flaky else {},
                scheduledAt=utc_now() + timedelta(milliseconds=rng.randint(0, 20_000)),
                maxAttempts=2,
            )

        batch = store.create_batch(
            NewBatch(tenant, f"batch-{n}", onComplete=job(f"batch-{n}-done"), onSuccess=job(f"batch-{n}-ok"))
        ).batch
        members = [job(f"batch-{n}-{m}", flaky=rng.random() < 0.2) for m in range(BATCH_MEMBERS)]
        assert all(not isinstance(added, Exception) for added in store.add_to_batch(batch.id, members))
        store.seal_batch(batch.id)
        made.append(batch.id)
    return made


def batch_violations(db: Database[dict[str, object]], store: MongoJobStore, batch_ids: list[str]) -> list[str]:
    """What went wrong in the batches: one not fired, a member not final, onComplete not run exactly once or started
    before the last member ended, onSuccess run though a member failed or not run though all completed."""
    bad = []
    for batch_id in batch_ids:
        view = store.batch(batch_id)
        assert view is not None
        if view.batch.firedAt is None:
            bad.append(f"batch {batch_id} never fired: {dict(view.counts)}")
            continue
        members = list(db["jobs"].find({"batchId": batch_id}))
        if any(m["status"] not in (Status.COMPLETED.value, Status.DLQ.value) for m in members):
            bad.append(f"batch {batch_id} fired with members not final")
        last_end = max(entry["finishedAt"] for m in members for entry in _history(m))
        all_completed = all(m["status"] == Status.COMPLETED.value for m in members)
        for name, callback_id in (("onComplete", view.batch.onComplete), ("onSuccess", view.batch.onSuccess)):
            doc = db["jobs"].find_one({"_id": ObjectId(callback_id)})
            assert doc is not None
            runs = [e for e in _history(doc) if e.get("startedAt") is not None]
            succeeded = [e for e in runs if e["outcome"] == Outcome.SUCCEEDED.value]
            should_run = name == "onComplete" or all_completed
            if should_run and (doc["status"] != Status.COMPLETED.value or len(succeeded) != 1):
                bad.append(f"batch {batch_id}: {name} is {doc['status']} after {len(succeeded)} successes")
            elif not should_run and (doc["status"] != Status.CANCELLED.value or runs):
                bad.append(f"batch {batch_id}: {name} is {doc['status']} though a member failed")
            elif runs and min(e["startedAt"] for e in runs) < last_end:
                bad.append(f"batch {batch_id}: {name} started before its last member ended")
    return bad


def dag_violations(db: Database[dict[str, object]], parents_of: dict[str, list[str]]) -> list[str]:
    """What went wrong in the graphs: a step not final, one started before a parent had completed, or one not
    cancelled though a parent failed."""
    docs = {str(d["_id"]): d for d in db["jobs"].find({"_id": {"$in": _ids(parents_of)}})}
    completed_at = {
        job_id: max(e["finishedAt"] for e in _history(doc) if e["outcome"] == Outcome.SUCCEEDED.value)
        for job_id, doc in docs.items()
        if doc["status"] == Status.COMPLETED.value
    }
    bad = []
    for job_id, parents in parents_of.items():
        doc = docs[job_id]
        starts = [e["startedAt"] for e in _history(doc) if e.get("startedAt") is not None]
        if doc["status"] not in (Status.COMPLETED.value, Status.DLQ.value, Status.CANCELLED.value):
            bad.append(f"{doc['idempotencyKey']} is {doc['status']}")
        elif any(p not in completed_at for p in parents):
            if doc["status"] != Status.CANCELLED.value or starts:
                bad.append(f"{doc['idempotencyKey']} is {doc['status']} though a parent failed")
        elif parents and starts and min(starts) < max(completed_at[p] for p in parents):
            bad.append(f"{doc['idempotencyKey']} started before a parent completed")
    return bad


def attempts_ended(db: Database[dict[str, object]], jobs: dict[str, object] | None = None) -> list[dict[str, Any]]:
    """Every ended attempt of the jobs matching `jobs` (all by default): its job's history entry, with its jobId."""
    return [
        {**entry, "jobId": str(doc["_id"])}
        for doc in db["jobs"].find(jobs or {}, {"history": 1})
        for entry in doc.get("history") or []  # type: ignore[attr-defined]
    ]


def overlapping_attempts(db: Database[dict[str, object]]) -> list[str]:
    """Jobs with two attempts that both ran to an end (not closed as lost) and overlapped in time."""
    by_job: dict[str, list[tuple[datetime, datetime]]] = {}
    ran = {Outcome.SUCCEEDED.value, Outcome.FAILED.value, Outcome.TIMEOUT.value}
    for entry in attempts_ended(db):
        if entry["outcome"] in ran:
            by_job.setdefault(entry["jobId"], []).append((entry["startedAt"], entry["finishedAt"]))
    bad = []
    for job_id, spans in by_job.items():
        spans.sort()
        if any(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans)):
            bad.append(job_id)
    return bad


def attempt_spans(db: Database[dict[str, object]], job_type: str) -> list[tuple[datetime, datetime]]:
    """Every attempt of the type's jobs, from its start to its decided end (lost ones: to when the reaper closed
    them, which is also when their slot came back)."""
    return [
        (entry["startedAt"], entry["finishedAt"])
        for entry in attempts_ended(db, {"jobType": job_type})
        if entry.get("startedAt") is not None
    ]


def most_at_once(spans: list[tuple[datetime, datetime]]) -> int:
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    peak = now = 0
    for _, change in events:
        now += change
        peak = max(peak, now)
    return peak


def most_starts_in_a_second(spans: list[tuple[datetime, datetime]]) -> int:
    starts = sorted(start for start, _ in spans)
    busiest = first = 0
    for last, moment in enumerate(starts):
        while moment - starts[first] >= timedelta(seconds=1):
            first += 1
        busiest = max(busiest, last - first + 1)
    return busiest


@pytest.mark.exclusive  # it restarts the shared Kafka
@pytest.mark.timeout(DRAIN_BOUND_S + 180)
def test_nothing_is_lost_when_everything_crashes(
    launch: Launch,
    mongo_store: MongoJobStore,
    mongo_db: Database[dict[str, object]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    if subprocess.run(["bash", str(LOCAL_SCRIPTS / "kafka.sh"), "status"], capture_output=True).returncode != 0:
        pytest.fail("the chaos test restarts Kafka: it needs the local broker of deployments/local/kafka.sh")
    rng = random.Random(20261129)
    mongo_db["jobs"].bulk_write([InsertOne(d) for d in job_mix(rng, JOBS)])
    dags = write_dags(mongo_store, rng)
    batch_ids = write_batches(mongo_store, rng)
    registry = MongoJobTypes(mongo_store.database)
    for job_type, limits in LIMITS.items():  # an operator's, stored before any process starts
        registry.set_limits(job_type, limits, utc_now())
    started = time.monotonic()

    schedulers = [launch("scheduler", name=f"scheduler-{i}", **FAST_RECOVERY) for i in range(2)]
    executors = [
        launch("executor", "--type", t, name=f"executor-{t}-{i}", **FAST_RECOVERY) for i, t in enumerate(EXECUTOR_TYPES)
    ]
    reaper = launch("reaper", name="reaper-0", **FAST_RECOVERY)
    kills: Counter[str] = Counter()

    def finished() -> int:
        ended = {"status": {"$in": [Status.COMPLETED.value, Status.DLQ.value]}}
        return mongo_db["jobs"].count_documents({**ended, "idempotencyKey": {"$regex": "^chaos-"}})

    def graphs_ended() -> bool:
        """Every step and batch job final, and every batch fired (on MongoDB its record says so after its
        callbacks were released: a crash between the two leaves it to the reaper's next sweep)."""
        final = [Status.COMPLETED.value, Status.DLQ.value, Status.CANCELLED.value]
        graphs = {"$or": [{"_id": {"$in": _ids(dags)}}, {"idempotencyKey": {"$regex": "^batch-"}}]}
        fired = all(view is not None and view.batch.firedAt is not None for view in map(mongo_store.batch, batch_ids))
        return fired and mongo_db["jobs"].count_documents({**graphs, "status": {"$nin": final}}) == 0

    def leader() -> ServiceProcess | None:
        return next((s for s in schedulers if s.process.poll() is None and s.metric("scheduler_is_leader") == 1), None)

    kafka_restarted = False
    for round_no in range(8):
        target = (round_no + 1) * JOBS // 12
        wait_until(lambda: finished() >= target, DRAIN_BOUND_S, f"{target} jobs finished")  # noqa: B023
        victim = rng.randrange(len(executors))
        job_type = EXECUTOR_TYPES[victim]
        executors[victim].kill()
        executors[victim] = launch(
            "executor", "--type", job_type, name=f"executor-{job_type}-r{round_no}", **FAST_RECOVERY
        )
        kills["executor"] += 1
        if round_no % 2 == 0 and (current := leader()) is not None:
            current.kill()
            schedulers[schedulers.index(current)] = launch("scheduler", name=f"scheduler-r{round_no}", **FAST_RECOVERY)
            kills["leader scheduler"] += 1
        if round_no % 3 == 1:
            reaper.kill()
            reaper = launch("reaper", name=f"reaper-r{round_no}", **FAST_RECOVERY)
            kills["reaper"] += 1
        if round_no == 4 and not kafka_restarted:
            subprocess.run(["bash", str(LOCAL_SCRIPTS / "kafka.sh"), "stop"], check=True, capture_output=True)
            subprocess.run(["bash", str(LOCAL_SCRIPTS / "kafka.sh"), "start"], check=True, capture_output=True)
            kafka_restarted = True

    wait_until(lambda: finished() == JOBS, DRAIN_BOUND_S, "every job to complete or reach the DLQ")
    wait_until(graphs_ended, DRAIN_BOUND_S, "every step of the graphs and every batch's job to end")
    drain_s = time.monotonic() - started

    chaos_jobs = {"idempotencyKey": {"$regex": "^chaos-"}}
    statuses = Counter(str(d["status"]) for d in mongo_db["jobs"].find(chaos_jobs, {"status": 1}))
    dag_statuses = Counter(str(d["status"]) for d in mongo_db["jobs"].find({"_id": {"$in": _ids(dags)}}, {"status": 1}))
    ended = attempts_ended(mongo_db)
    outcomes = Counter(str(entry["outcome"]) for entry in ended)
    # Every job finished; with flaky's odds a run may dead-letter none (the Counter then has no "dlq" key).
    assert set(statuses) <= {"completed", "dlq"}, statuses
    assert sum(statuses.values()) == JOBS
    assert overlapping_attempts(mongo_db) == []
    successes = Counter(entry["jobId"] for entry in ended if entry["outcome"] == Outcome.SUCCEEDED.value)
    completed_twice = [job_id for job_id, n in successes.items() if n > 1]
    assert completed_twice == []
    slow_at_once = most_at_once(attempt_spans(mongo_db, "slow"))
    flaky_busiest = most_starts_in_a_second(attempt_spans(mongo_db, "flaky"))
    assert 1 < slow_at_once <= SLOW_AT_ONCE
    assert 1 < flaky_busiest <= FLAKY_PER_SECOND
    assert dag_violations(mongo_db, dags) == []
    assert dag_statuses[Status.COMPLETED.value] > 0
    assert batch_violations(mongo_db, mongo_store, batch_ids) == []
    batch_statuses = Counter(view.status.value for i in batch_ids if (view := mongo_store.batch(i)) is not None)
    logs = [p.log_text() for p in launch.started]
    skipped = sum(text.count('"action": "delivery_skipped"') for text in logs)
    with capsys.disabled():
        print(
            f"\n[chaos] jobs={JOBS} statuses={dict(statuses)} attempts={dict(outcomes)} kills={dict(kills)} "
            f"kafka_restarts={int(kafka_restarted)} recoveries(lost attempts)={outcomes['lost']} "
            f"duplicate/stale deliveries absorbed={skipped} time_to_drain={drain_s:.1f}s "
            f"slow at once={slow_at_once} (limit {SLOW_AT_ONCE}) flaky busiest second={flaky_busiest} "
            f"(limit {FLAKY_PER_SECOND}) graphs={DAGS} steps={dict(dag_statuses)} batches={dict(batch_statuses)} "
            f"at={datetime.now(UTC).isoformat(timespec='seconds')}"
        )


def _ids(parents_of: dict[str, list[str]]) -> list[ObjectId]:
    return [ObjectId(job_id) for job_id in parents_of]


def _history(doc: dict[str, object]) -> list[dict[str, Any]]:
    return cast(list[dict[str, Any]], doc.get("history") or [])
