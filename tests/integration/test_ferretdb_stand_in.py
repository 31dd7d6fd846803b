"""What the local MongoDB stand-in adds behind FerretDB's back (deployments/local/ferretdb-pg-indexes.sql):
PostgreSQL GIN indexes that FerretDB 1.x's pushed-down equality filters can use. FerretDB's `explain` returns
PostgreSQL's plan, so this asserts through the wire protocol that the hot keys are answered by an index and an
ordinary key still by a scan. Specific to FerretDB on PostgreSQL, the stand-in `make test` runs; pointed at
another server (README, Tests) the test says so and skips."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo.database import Database

pytestmark = pytest.mark.integration

Doc = dict[str, Any]
DOCS = 5_000


def plan_node(db: Database[Doc], query: Doc) -> str | None:
    """PostgreSQL's top plan node for `query`, None when the server is not FerretDB on PostgreSQL."""
    plan = db.command("explain", {"find": "jobs", "filter": query})
    node = plan.get("queryPlanner", {}).get("Plan", {}).get("Node Type")
    return str(node) if node else None


def test_hot_equality_keys_are_answered_by_an_index_and_other_keys_by_a_scan(mongo_db: Database[Doc]) -> None:
    jobs = mongo_db["jobs"]
    jobs.insert_many(
        [
            {"claimToken": f"c{n // 10}", "startToken": f"s{n // 10}", "dueSlot": n // 10, "kind": "run", "n": n}
            for n in range(DOCS)
        ]
    )
    jobs.insert_one({"kind": "template", "n": -1})
    some_id = jobs.find_one({"n": 7})["_id"]  # type: ignore[index]
    control = plan_node(mongo_db, {"n": 7})
    if control is None:  # pointed at MongoDB or FerretDB on SQLite (README, Tests): nothing of this applies
        pytest.skip("not FerretDB on PostgreSQL: the stand-in's PostgreSQL indexes do not exist here")
    assert control == "Seq Scan"  # no index: the control
    hot_keys = ({"_id": some_id}, {"claimToken": "c7"}, {"startToken": "s7"}, {"dueSlot": 7}, {"kind": "template"})
    for hot in hot_keys:
        assert plan_node(mongo_db, {**hot, "n": 70}) == "Bitmap Heap Scan", hot
