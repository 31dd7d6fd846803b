"""Smoke test of the MongoDB stand-in (FerretDB 1.24, deployments/local/ferretdb.sh).

Uses the fixtures of tests/conftest.py: `mongo_uri` (session) and `mongo_db` (a fresh database per test,
dropped afterwards). Only behaviour that real MongoDB shares is asserted, so the suite also runs against it.
"""

from __future__ import annotations

from typing import Any

import pytest
from pymongo import ASCENDING, MongoClient
from pymongo.database import Database
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure, PyMongoError

pytestmark = pytest.mark.integration

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
    # MongoDB answers DuplicateKeyError (11000). FerretDB 1.24 does not map the backend's constraint error:
    # it answers code 1 (InternalError) on both SQLite and PostgreSQL. Both are OperationFailure, and in both
    # cases the document is left unchanged; code that needs the distinction must not rely on 11000 here.
    jobs = mongo_db["jobs"]
    jobs.create_index([("idempotencyKey", ASCENDING)], unique=True)
    jobs.insert_many([{"_id": 1, "idempotencyKey": "a"}, {"_id": 2, "idempotencyKey": "b"}])

    with pytest.raises(OperationFailure) as excinfo:
        jobs.update_one({"_id": 2}, {"$set": {"idempotencyKey": "a"}})

    assert excinfo.value.code in (11000, 1)
    assert list(jobs.find({}).sort("_id", ASCENDING)) == [
        {"_id": 1, "idempotencyKey": "a"},
        {"_id": 2, "idempotencyKey": "b"},
    ]
