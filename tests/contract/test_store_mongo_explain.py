"""Every query the MongoDB store and its browser send is served by an index: the queries of a workload that
walks every store and browser call are recorded as the driver sends them (command monitoring), and each is
explained by the server, which must name an index of the collection other than the plain _id one for every
query that does not look jobs up by _id. On FerretDB the plan is PostgreSQL's (an index scan names the index);
on MongoDB a winning plan of IXSCAN stages. Commands the server cannot explain are left out; finds and
aggregations must all be explained."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from pymongo import MongoClient, monitoring
from pymongo.errors import OperationFailure

from jobsched.backoff import Backoff
from jobsched.type_defaults import TypeDefaults
from shared.model import Outcome, Status, utc_now
from shared.store.base import NewBatch, NewStep, NewWorkflow, RunSpec
from shared.store.browse import JobQuery, PageCursor
from shared.store.claim_limits import ClaimLimits
from shared.store.mongo import MongoDatabase, MongoJobStore
from shared.store.mongo.browse import MongoBrowser
from shared.store.mongo.job_types import MongoJobTypes
from shared.store.mongo.migrations import backoff_on_jobs
from tests.contract.store_kit import claim_one, new, result, running

READS = ("find", "aggregate", "count", "distinct")
# Collections read whole by design: the announcements (one document per executor and type: job_types.py), and the
# attempt records that migration attempt_history_in_jobs copies into the jobs once.
READ_WHOLE = frozenset({"job_type_announcements", "executions"})
# Filler documents, so that a server with statistics prefers an index to reading the collection.
FILLER = 3000


class Recorder(monitoring.CommandListener):
    def __init__(self) -> None:
        self.commands: list[dict[str, Any]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name in (*READS, "delete", "update", "findAndModify"):
            self.commands.append(dict(event.command))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


@pytest.fixture
def recorded(mongo_uri: str, mongo_db: Any) -> Iterator[tuple[MongoJobStore, Recorder]]:
    recorder = Recorder()
    client: MongoClient[dict[str, Any]] = MongoClient(mongo_uri, tz_aware=True, event_listeners=[recorder])
    store = MongoJobStore(MongoDatabase(client, mongo_db.name))
    store.ensure_schema()
    yield store, recorder
    client.close()


def workload(store: MongoJobStore) -> None:
    """Every store and browser call that queries, each once at least, and the migration that queries jobs."""
    later = utc_now() + timedelta(hours=1)
    store.create_many([new(f"filler-{n}", tenantId=f"t{n % 10}", scheduledAt=later) for n in range(FILLER)])
    job = store.create(new("one"))
    store.create_many([new("one")])  # a duplicate: its holder looked up by key
    store.job_by_key("tenant-a", "one")
    done = running(store)
    store.finish_attempt(done, result(Outcome.SUCCEEDED))
    dead = running(store, maxAttempts=1)
    store.finish_attempt(dead, result(Outcome.FAILED, "boom"))
    store.list_executions(dead.id)
    store.redrive(dead.id)
    lost = running(store, lease_until=utc_now() - timedelta(seconds=1))
    for expired in store.expired_attempts(utc_now(), 10):
        store.recover_attempt(expired, "lost")
    store.cancel(job.id)
    store.cancel(running(store).id)
    store.cancel_requested([lost])
    store.release_claims([claim_one(store, store.create(new(jobType="released")))])
    store.release_stale_claims(utc_now() - timedelta(minutes=1))
    store.create_many([new(f"lane-{n}", tenantId=f"lane-{n % 3}", jobType="laned") for n in range(6)])
    store.claim_due_jobs(utc_now(), 2, {"laned"}, limits={"laned": ClaimLimits(queued=4, active=5)})
    store.claim_due_jobs(utc_now(), 2, {"laned"}, limits={"laned": ClaimLimits(queued=1)})  # no room: held
    template = store.create(new("nightly", cron="0 2 * * *"))
    store.due_templates(utc_now() + timedelta(days=2), 10)
    store.add_runs(template, [RunSpec(utc_now() - timedelta(hours=2)), RunSpec(utc_now(), status=Status.BUFFERED)])
    for run in store.buffered_runs(10):
        store.promote_buffered(run, utc_now())
    store.template_runs(template.id, None, 10)
    store.template_runs(template.id, {Status.PENDING}, 10)
    store.due_job_types(utc_now())
    parent = running(store, jobType="parent")
    store.create(new("dependent", dependsOn=[parent.id]))  # a parent's end reads its waiting dependents
    store.finish_attempt(parent, result(Outcome.SUCCEEDED))
    store.settle_dependents(utc_now() + timedelta(minutes=1), 10)
    batch = store.create_batch(NewBatch("tenant-a", "run", onComplete=new("on-complete"))).batch
    store.add_to_batch(batch.id, [new(f"member-{n}") for n in range(3)])
    store.seal_batch(batch.id)
    store.batches("tenant-a", 10)
    first = store.batch_members(batch.id, None, 2)
    store.batch_members(batch.id, first[-1], 2)
    store.batch_members(batch.id, None, 2, status=Status.PENDING.value, results=False)
    store.settle_batches(10)
    step = NewStep("only", new("step"))
    workflow = store.create_workflow(NewWorkflow("tenant-a", "etl", (step, NewStep("next", new("next"), ("only",)))))
    store.workflow(workflow.workflow.id)
    store.workflow_by_key("tenant-a", "etl")
    store.workflows("tenant-a", 10)
    store.delete_finished(Status.COMPLETED, utc_now() + timedelta(seconds=1), 10)
    store.delete(store.cancel(store.create(new("to-delete", scheduledAt=later)).id).id)
    browser = MongoBrowser(store.database)
    cursor = PageCursor(utc_now(), "0" * 24)
    for query in (
        JobQuery(),
        JobQuery(status=Status.PENDING),
        JobQuery(status=Status.COMPLETED, before=cursor),
        JobQuery(jobType="noop", after=cursor),
        JobQuery(templateId=template.id),
        JobQuery(templates=True),
    ):
        browser.page("tenant-a", query)
    browser.counts("tenant-a", utc_now() - timedelta(hours=1))
    browser.dlq_groups("tenant-a", 10)
    browser.dead_letters("tenant-a", "boom", 10)
    browser.tenants("tenant-a", 10)
    store.sample_backlog(utc_now())
    browser.history("tenant-a", "noop", utc_now() - timedelta(hours=1), utc_now())
    browser.history(None, None, utc_now() - timedelta(days=1), utc_now())
    # The migration that updates jobs, again once a type announced a backoff of its own (the fixture ran it on an
    # empty database): it looks the type's jobs up by type and status.
    now = utc_now()
    MongoJobTypes(store.database).announce("e1", {"noop": TypeDefaults(backoff=Backoff(base_s=5))}, now, now)
    backoff_on_jobs(store.database)


def plan_indexes(plan: Any) -> set[str]:
    """The index names a plan (MongoDB's or FerretDB's PostgreSQL plan) scans, `_id_` only when the scan is by
    _id (FerretDB's _id_ index also serves a scan of the whole collection by its shard key)."""
    found: set[str] = set()
    if isinstance(plan, dict):
        name = plan.get("indexName") or plan.get("Index Name")
        if name and not (name == "_id_" and "shard_key_value" in str(plan.get("Index Cond", ""))):
            found.add(str(name))
        for value in plan.values():
            found |= plan_indexes(value)
    elif isinstance(plan, list):
        for item in plan:
            found |= plan_indexes(item)
    return found


def by_id(command: dict[str, Any]) -> bool:
    """A command whose filter names _id (a job, a record or a cancel request looked up by id): the _id index
    serves it (FerretDB's plan shows that index's scan by its shard key for it too)."""
    filters = [command.get("filter"), *(q.get("q") for q in command.get("deletes", []) if isinstance(q, dict))]
    return any(isinstance(f, dict) and "_id" in f for f in filters)


def test_every_query_is_served_by_an_index(recorded: tuple[MongoJobStore, Recorder]) -> None:
    store, recorder = recorded
    workload(store)
    db = store.database.client[store.database.name]
    explained = unexplained = 0
    for command in recorder.commands:
        name = next(iter(command))
        query = {k: v for k, v in command.items() if k not in ("lsid", "$db", "$clusterTime", "txnNumber")}
        try:
            plan = db.command({"explain": query, "verbosity": "queryPlanner"})
        except OperationFailure:
            assert name not in ("find", "aggregate"), f"the server could not explain {query}"
            unexplained += 1
            continue
        explained += 1
        indexes = plan_indexes(plan)
        if not indexes and (by_id(query) or (name == "find" and query[name] in READ_WHOLE)):
            continue
        assert indexes, f"no index serves {json.dumps(query, default=str)[:600]}"
    assert explained >= 20
