"""The client's workflows (jobsched/client/workflows.py, _calls.py): the builder makes the body the API takes
(POST /workflows), checks it as the API would before anything is sent, and both clients submit it, get, list and
cancel workflows: the body and the checks here, without a server; what the API answers is tested against a real
one (tests/e2e/test_workflows.py, test_client.py, test_operator_cli.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

import jobsched
from jobsched import HandlerContext, JobTypes
from jobsched.client import (
    Client,
    Conflict,
    DuplicateWorkflow,
    Job,
    Retries,
    StepGroup,
    StepRef,
    WorkflowBuilder,
)
from jobsched.client.errors import error_for

WORKFLOW_ID = "6650f0c2a1b2c3d4e5f60718"
NO_WAIT = Retries(attempts=3, base_s=0.0, cap_s=0.0)


@dataclass(frozen=True)
class Day:
    day: str
    rows: int = 0


jobs = JobTypes()


@jobs.handler("extract")
def extract(payload: Day, ctx: HandlerContext) -> int:
    return payload.rows


@jobs.handler("load")
def load(payload: dict[str, Any], ctx: HandlerContext) -> None:
    return None


def workflow_body(**changed: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": WORKFLOW_ID,
        "tenantId": "acme",
        "idempotencyKey": "etl-2026-12-06",
        "name": "nightly-etl",
        "createdAt": "2026-12-06T02:00:00Z",
        "status": "running",
        "counts": {"completed": 1, "waiting": 1},
        "steps": [
            {"name": "extract", "jobId": "a" * 24, "jobType": "extract", "after": [], "status": "completed"},
            {"name": "load", "jobId": "b" * 24, "jobType": "load", "after": ["extract"], "status": "waiting"},
        ],
    }
    return {**body, **changed}


def unsent() -> WorkflowBuilder[None, None]:
    """A builder whose submit would fail the test: for what is checked before anything is sent."""

    def send(call: Any) -> None:
        raise AssertionError(f"sent {call}")

    return WorkflowBuilder(send, send, "k", tenant_id="acme")


# --- the body ---------------------------------------------------------------------------------------------


def test_the_body_is_the_contracts_steps_with_typed_payloads_encoded() -> None:
    with Client("http://127.0.0.1:1", tenant_id="acme") as client:  # nothing is sent before submit
        flow = client.workflow("etl-2026-12-06", name="nightly-etl", scheduled_at=datetime(2026, 12, 6, 2, tzinfo=UTC))
        first = flow.step("extract", extract, Day("2026-12-06", rows=3), priority=5, max_attempts=2)
        flow.step(
            "transform-1",
            "transform",
            {"part": 1},
            after=first,
            on_parent_failure="run",
            timeout_seconds=30,
            concurrency_key="c",
        )
        flow.step("load", load, {"table": "facts"}, after=["transform-1", first])
        body = flow.body()
    assert first == StepRef("extract", "extract")
    assert body == {
        "idempotencyKey": "etl-2026-12-06",
        "tenantId": "acme",
        "name": "nightly-etl",
        "scheduledAt": "2026-12-06T02:00:00.000Z",
        "steps": [
            {
                "name": "extract",
                "jobType": "extract",
                "payload": {"day": "2026-12-06", "rows": 3},
                "priority": 5,
                "maxAttempts": 2,
            },
            {
                "name": "transform-1",
                "jobType": "transform",
                "payload": {"part": 1},
                "onParentFailure": "run",
                "timeoutSeconds": 30,
                "concurrencyKey": "c",
                "after": ["extract"],
            },
            {"name": "load", "jobType": "load", "payload": {"table": "facts"}, "after": ["transform-1", "extract"]},
        ],
    }


def test_left_out_fields_are_left_out_and_the_client_tenant_is_the_default() -> None:
    with Client("http://127.0.0.1:1") as untenanted, Client("http://127.0.0.1:1", tenant_id="acme") as client:
        bare = untenanted.workflow()
        bare.step("only", "noop")
        assert set(bare.body()) == {"idempotencyKey", "steps"}  # scheduledAt: the API's now
        assert bare.body()["steps"] == [{"name": "only", "jobType": "noop", "payload": {}}]
        other = client.workflow(tenant_id="other")
        other.step("only", "noop")
        assert other.body()["tenantId"] == "other"


def test_a_key_is_generated_once_per_builder() -> None:
    with Client("http://127.0.0.1:1") as client:
        flow = client.workflow()
        flow.step("only", "noop")
        assert re.fullmatch(r"workflow-[0-9a-f]{32}", flow.idempotency_key)
        assert flow.body()["idempotencyKey"] == flow.body()["idempotencyKey"] == flow.idempotency_key
        assert client.workflow().idempotency_key != flow.idempotency_key
        assert client.workflow("mine").idempotency_key == "mine"


def test_a_payload_of_another_type_than_the_handlers_is_refused() -> None:
    flow = unsent()
    with pytest.raises(TypeError, match="the payload must be a Day, not dict"):
        flow.step("extract", extract, {"day": "d"})  # type: ignore[misc]  # P cannot be Day and dict: as enqueue
    with pytest.raises(ValueError, match="the payload is not JSON"):
        flow.step("load", "load", {"when": datetime.now(UTC)})
    assert flow.steps == []


def test_after_may_name_a_step_added_later() -> None:
    flow = unsent()
    flow.step("load", "load", after="extract")
    flow.step("extract", "extract")
    assert [step.get("after") for step in flow.body()["steps"]] == [["extract"], None]


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (lambda flow: None, "a workflow needs at least one step"),
        (lambda flow: flow.step("load", "load", after=["transfrom"]), r"steps\[0\] \(load\): after: no step named"),
        (lambda flow: flow.step("loop", "noop", after="loop"), "a step cannot wait for itself"),
        (lambda flow: flow.step("first", "noop", on_parent_failure="run"), "only a step with `after`"),
        (
            lambda flow: (
                [flow.step("a", "noop", after="c"), flow.step("b", "noop", after="a"), flow.step("c", "noop")]
                and flow.chain("b", "c")
            ),
            "steps a -> c -> b -> a wait for one another",
        ),
    ],
)
def test_steps_the_api_would_refuse_are_refused_before_anything_is_sent(
    build: Callable[[WorkflowBuilder[None, None]], Any], says: str
) -> None:
    flow = unsent()
    build(flow)
    with pytest.raises(ValueError, match=says):
        flow.submit()


def test_a_step_name_is_unique() -> None:
    flow = unsent()
    flow.step("extract", "extract")
    with pytest.raises(ValueError, match="a step named 'extract' is in the workflow already"):
        flow.step("extract", "load")


# --- chain, group, fan_in ---------------------------------------------------------------------------------


def afters(flow: WorkflowBuilder[Any, Any]) -> dict[str, list[str]]:
    return {step["name"]: step.get("after", []) for step in flow.body()["steps"]}


def test_chain_links_each_step_or_group_to_the_one_before() -> None:
    flow = unsent()
    first = flow.step("extract", "extract")
    parts = flow.group(*(flow.step(f"transform-{i}", "transform", {"part": i}) for i in range(3)))
    last = flow.step("load", "load")
    assert isinstance(parts, StepGroup)
    assert [ref.name for ref in parts] == ["transform-0", "transform-1", "transform-2"]
    flow.chain(first, parts, last)
    assert afters(flow) == {
        "extract": [],
        "transform-0": ["extract"],
        "transform-1": ["extract"],
        "transform-2": ["extract"],
        "load": ["transform-0", "transform-1", "transform-2"],
    }


def test_chain_adds_to_what_a_step_waits_for_once() -> None:
    flow = unsent()
    flow.step("a", "noop")
    flow.step("b", "noop")
    flow.step("c", "noop", after="b")
    flow.chain("a", "c")
    flow.chain("a", "c")
    assert afters(flow)["c"] == ["b", "a"]


def test_fan_in_makes_one_step_wait_for_many() -> None:
    flow = unsent()
    parents = [flow.step(f"fetch-{i}", "fetch") for i in range(2)]
    report = flow.step("report", "report")
    assert flow.fan_in(parents, report) == report
    assert flow.fan_in(flow.group("fetch-0"), "report") == report  # again: nothing twice
    assert afters(flow)["report"] == ["fetch-0", "fetch-1"]
    with pytest.raises(ValueError, match="no step named 'nope'"):
        flow.fan_in(["nope"], report)
    with pytest.raises(ValueError, match="no step named 'nope'"):
        flow.group("fetch-0", "nope")
    with pytest.raises(ValueError, match="no step named 'nope'"):
        flow.chain(report, "nope")


# --- submitting, reading, listing, cancelling -------------------------------------------------------------


def test_a_409_names_a_workflow_or_a_job() -> None:
    assert isinstance(error_for(409, {"error": "x", "workflowId": WORKFLOW_ID}), DuplicateWorkflow)
    assert not isinstance(error_for(409, {"error": "x", "jobId": WORKFLOW_ID}), DuplicateWorkflow)
    assert type(error_for(409, {"error": "x"})) is Conflict


def test_a_steps_job_knows_its_workflow_and_step() -> None:
    job = {
        "id": "a" * 24,
        "idempotencyKey": "k",
        "tenantId": "acme",
        "jobType": "extract",
        "status": "completed",
        "workflowId": WORKFLOW_ID,
        "step": "extract",
    }
    assert (Job.from_wire(job).workflow_id, Job.from_wire(job).step) == (WORKFLOW_ID, "extract")
    assert Job.from_wire({**job, "workflowId": None, "step": None}).workflow_id is None


def test_the_public_package_names_the_workflow_types() -> None:
    for name in ("Workflow", "WorkflowStep", "WorkflowBuilder", "StepRef", "StepGroup", "DuplicateWorkflow"):
        assert name in jobsched.__all__
        assert getattr(jobsched, name) is getattr(jobsched.client, name)
