"""Smoke test of the MongoDB-compatible server `make test` runs (FerretDB 2 on PostgreSQL with DocumentDB,
deployments/local/ferretdb.sh): what the MongoDB store relies on, server-side.

Uses the fixtures of tests/conftest.py: `mongo_uri` (session) and `mongo_db` (a fresh database per test,
dropped afterwards). Only behaviour that real MongoDB shares is asserted, so the suite also runs against it.
"""

from __future__ import annotations

import json
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from pymongo import ASCENDING, DESCENDING, MongoClient, ReturnDocument
from pymongo.database import Database
from pymongo.errors import BulkWriteError, DuplicateKeyError, PyMongoError

Doc = dict[str, Any]


@pytest.fixture(scope="module", autouse=True)
def _server_reachable(mongo_uri: str) -> None:
    """One short ping for the module: with no server, every test errors at once instead of each waiting out
    the shared client's server-selection timeout (in setup and again in teardown)."""
    client: MongoClient[Doc] = MongoClient(mongo_uri, serverSelectionTimeoutMS=1000, connectTimeoutMS=1000)
    error: PyMongoError | None = None
    try:
        client.admin.command("ping")
    except PyMongoError as exc:
        error = exc
    finally:
        client.close()
    if error is not None:
        pytest.fail(f"no MongoDB-compatible server at {mongo_uri}: {error}", pytrace=False)


def test_insert_then_find_one_round_trips(mongo_db: Database[Doc]) -> None:
    jobs = mongo_db["jobs"]
    doc: Doc = {"idempotencyKey": "k-1", "tenantId": "t-1", "priority": 5, "payload": {"args": [1, "two"]}}

    inserted_id = jobs.insert_one(doc).inserted_id

    found = jobs.find_one({"_id": inserted_id})
    assert found is not None
    assert found == doc  # insert_one added the generated _id to doc


def test_second_insert_with_same_unique_key_raises_duplicate_key(mongo_db: Database[Doc]) -> None:
    jobs = mongo_db["jobs"]
    jobs.create_index([("idempotencyKey", ASCENDING)], unique=True)
    jobs.insert_one({"idempotencyKey": "k-1", "attempt": 1})

    with pytest.raises(DuplicateKeyError) as excinfo:
        jobs.insert_one({"idempotencyKey": "k-1", "attempt": 2})

    assert excinfo.value.code == 11000
    assert jobs.count_documents({"idempotencyKey": "k-1"}) == 1


def test_unordered_insert_many_reports_the_one_duplicate_and_inserts_the_rest(mongo_db: Database[Doc]) -> None:
    jobs = mongo_db["jobs"]
    jobs.create_index([("idempotencyKey", ASCENDING)], unique=True)
    jobs.insert_one({"idempotencyKey": "k-2"})
    batch: list[Doc] = [{"idempotencyKey": f"k-{i}"} for i in range(1, 6)]  # k-2 is the duplicate

    with pytest.raises(BulkWriteError) as excinfo:
        jobs.insert_many(batch, ordered=False)

    details = excinfo.value.details
    assert [e["code"] for e in details["writeErrors"]] == [11000]
    assert details["writeErrors"][0]["index"] == 1
    assert details["nInserted"] == 4
    keys = sorted(d["idempotencyKey"] for d in jobs.find({}, {"idempotencyKey": 1, "_id": 0}))
    assert keys == ["k-1", "k-2", "k-3", "k-4", "k-5"]


def test_update_that_would_violate_a_unique_index_is_rejected(mongo_db: Database[Doc]) -> None:
    jobs = mongo_db["jobs"]
    jobs.create_index([("idempotencyKey", ASCENDING)], unique=True)
    jobs.insert_many([{"_id": 1, "idempotencyKey": "a"}, {"_id": 2, "idempotencyKey": "b"}])

    with pytest.raises(DuplicateKeyError):
        jobs.update_one({"_id": 2}, {"$set": {"idempotencyKey": "a"}})

    assert list(jobs.find({}).sort("_id", ASCENDING)) == [
        {"_id": 1, "idempotencyKey": "a"},
        {"_id": 2, "idempotencyKey": "b"},
    ]


def test_racing_find_one_and_update_calls_take_each_document_once(mongo_uri: str, mongo_db: Database[Doc]) -> None:
    """A single-document update is atomic: eight clients taking `pending` documents one at a time never take
    one twice (the store moves a job only with such guarded updates)."""
    count = 400
    mongo_db["jobs"].insert_many([{"_id": n, "status": "pending"} for n in range(count)])

    def take_all(worker: int) -> list[int]:
        client: MongoClient[Doc] = MongoClient(mongo_uri)
        jobs = client[mongo_db.name]["jobs"]
        taken = []
        try:
            while doc := jobs.find_one_and_update(
                {"status": "pending"}, {"$set": {"status": "taken", "by": worker}}, return_document=ReturnDocument.AFTER
            ):
                assert doc["by"] == worker
                taken.append(doc["_id"])
        finally:
            client.close()
        return taken

    with ThreadPoolExecutor(8) as pool:
        taken = Counter(n for batch in pool.map(take_all, range(8)) for n in batch)
    assert set(taken) == set(range(count))
    assert set(taken.values()) == {1}


def test_partial_indexes_are_built_and_a_range_claim_is_served_by_its_index(mongo_db: Database[Doc]) -> None:
    jobs = mongo_db["jobs"]
    jobs.create_index([("status", ASCENDING), ("priority", DESCENDING), ("at", ASCENDING)], name="claim")
    jobs.create_index([("at", ASCENDING)], name="done_at", partialFilterExpression={"status": "done"})
    jobs.insert_many([{"status": "pending" if n % 10 else "done", "priority": n % 3, "at": n} for n in range(5_000)])

    assert jobs.index_information()["done_at"]["partialFilterExpression"] == {"status": "done"}
    plan = mongo_db.command(
        "explain",
        {"find": "jobs", "filter": {"status": "pending", "at": {"$lte": 100}}, "sort": {"priority": -1, "at": 1}},
    )
    assert '"claim"' in json.dumps(plan, default=str)  # the index's name, in either server's plan format
