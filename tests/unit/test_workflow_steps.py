"""What a workflow's step reads of its parents (ctx.step_results, step_result typed) and `testing.run_workflow`,
which runs a workflow's steps in process in the order the product would, failures and policies included."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

import pytest

from jobsched import Client, HandlerContext, JobTypes, PayloadMismatch, testing
from jobsched.handlers import ParentResult

jobs = JobTypes()


@dataclass
class Rows:
    table: str
    count: int


@jobs.handler("extract")
def extract(payload: dict[str, Any], ctx: HandlerContext) -> Rows:
    if payload.get("fail"):
        raise RuntimeError("source down")
    return Rows(payload["table"], 10)


@jobs.handler("load")
def load(payload: dict[str, Any], ctx: HandlerContext) -> dict[str, Any]:
    rows = [ctx.step_result(name, Rows) for name in sorted(ctx.step_results())]
    return {"tables": [r.table for r in rows], "count": sum(r.count for r in rows)}


def test_a_step_reads_its_parents_results_by_step_name_typed() -> None:
    ctx = testing.context(step_results={"orders": {"table": "orders", "count": 3}, "note": None})
    assert ctx.step_results() == {"orders": {"table": "orders", "count": 3}, "note": None}
    assert ctx.step_result("orders", Rows) == Rows("orders", 3)
    assert ctx.step_result("note") is None
    with pytest.raises(KeyError, match="'missing' is not a step this one waited for"):
        ctx.step_result("missing")
    with pytest.raises(PayloadMismatch, match="'count' is missing"):
        testing.context(step_results={"bad": {"table": "t"}}).step_result("bad", Rows)


def test_parents_outside_a_workflow_are_not_steps() -> None:
    ctx = testing.context(parent_results={"66f9a1c2e4b0a3d5c8f12a01": 1})
    assert ctx.step_results() == {}
    assert ctx.parent_results() == {"66f9a1c2e4b0a3d5c8f12a01": 1}
    named = replace(ctx, parents=("a",), read_results=lambda ids: {"a": ParentResult("x", 2)})
    assert named.step_results() == {"x": 2}


def flow(*, fail: bool = False, policy: Literal["cancel", "run"] = "cancel") -> Any:
    built = Client("http://127.0.0.1:1").workflow("etl")
    orders = built.step("orders", "extract", {"table": "orders", "fail": fail})
    users = built.step("users", "extract", {"table": "users"})
    built.step("load", "load", after=[orders, users], on_parent_failure=policy)
    return built


def test_run_workflow_runs_each_step_after_its_parents_with_their_results() -> None:
    runs = testing.run_workflow(flow(), jobs)
    assert list(runs) == ["orders", "users", "load"]
    assert runs["orders"] == testing.StepRun("completed", {"table": "orders", "count": 10})
    assert runs["load"].result == {"tables": ["orders", "users"], "count": 20}


def test_run_workflow_cancels_what_waits_on_a_failed_step_unless_it_runs_anyway() -> None:
    runs = testing.run_workflow(flow(fail=True), jobs)
    assert runs["orders"].status == "dlq"
    assert str(runs["orders"].error) == "source down"
    assert runs["load"].status == "cancelled"
    anyway = testing.run_workflow(flow(fail=True, policy="run"), jobs)
    assert anyway["load"].status == "dlq"  # it ran, and could not read the failed parent's result
    assert isinstance(anyway["load"].error, PayloadMismatch)
