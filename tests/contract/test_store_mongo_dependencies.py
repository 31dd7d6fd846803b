"""Waiting jobs on MongoDB, where a wait is settled in steps a crash may stop (store/mongo/dependencies.py): the
reaper's sweep settles what a crash left, once the mark is older than its grace; an executor's batch of successes
settles the dependents a job got after its attempt started."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from bson import ObjectId
from pymongo.database import Database

from shared.model import Outcome, Status, utc_now
from shared.store import transitions
from shared.store.base import AttemptFinish
from shared.store.mongo import MongoJobStore
from shared.store.mongo.codecs import job_document
from tests.contract.store_kit import new, reload, result, running


def test_the_sweep_settles_what_a_crash_left_once_the_mark_is_old_enough(
    mongo_store: MongoJobStore, mongo_db: Database[dict[str, Any]]
) -> None:
    store = mongo_store

    # A parent that ended without settling its dependent (its process died between the two writes).
    parent = running(store, jobType="parent")
    child = store.create(new(jobType="child", dependsOn=[parent.id]))
    mongo_db["jobs"].update_one({"_id": ObjectId(parent.id)}, {"$set": {"status": "completed"}})
    # A dependent whose create died after its insert, its parent ended before it: never settled.
    ended = store.finish_attempt(running(store, jobType="ended"), result(Outcome.SUCCEEDED))
    assert ended is not None
    store.create(new(jobType="first-child", dependsOn=[ended.id]))  # marks `ended`
    orphan = job_document(transitions.new_job(new("orphan", jobType="child", dependsOn=[ended.id]), utc_now()))
    mongo_db["jobs"].insert_one(orphan)
    assert {reload(store, child).status, reload(store, str(orphan["_id"])).status} == {Status.WAITING}

    marked = mongo_db["jobs"].find_one({"_id": ObjectId(parent.id)})
    assert marked is not None
    marked_at = marked["dependentsAt"]
    assert store.settle_dependents(marked_at - timedelta(seconds=1), 100) == 0  # within the grace: left
    assert reload(store, child).status is Status.WAITING

    assert store.settle_dependents(utc_now() + timedelta(seconds=1), 100) == 2
    assert reload(store, child).status is Status.PENDING
    assert reload(store, str(orphan["_id"])).status is Status.PENDING
    marks = mongo_db["jobs"].count_documents({"hasDependents": True})
    assert marks == 0
    assert store.settle_dependents(utc_now() + timedelta(seconds=1), 100) == 0  # each parent swept once


def test_a_batch_of_successes_settles_a_dependent_made_after_the_attempt_started(mongo_store: MongoJobStore) -> None:
    store = mongo_store

    others = [running(store, jobType="parent") for _ in range(3)]
    parent = running(store, jobType="parent")  # as its executor read it: no dependents yet
    child = store.create(new(jobType="child", dependsOn=[parent.id]))
    finishes = [AttemptFinish(job, result(Outcome.SUCCEEDED)) for job in [*others, parent]]
    closed = store.finish_attempts(finishes)
    assert [getattr(c, "status", c) for c in closed] == [Status.COMPLETED] * 4
    assert reload(store, child).status is Status.PENDING
