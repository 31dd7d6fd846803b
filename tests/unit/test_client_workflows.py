"""The client's workflows (jobsched/client/workflows.py, _calls.py): the builder makes the body the API takes
(POST /workflows), checks it as the API would before anything is sent, and both clients submit it, get, list and
cancel workflows. The API is an httpx.MockTransport here: what is sent, and what a given answer becomes."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

import jobsched
from jobsched import HandlerContext, JobTypes
from jobsched.client import (
    AsyncClient,
    Client,
    Conflict,
    DuplicateWorkflow,
    Job,
    NotFound,
    Retries,
    StepGroup,
    StepRef,
    Workflow,
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


class Api:
    """Answers each request with the next of `answers` (a Response, or an exception to raise), and keeps the
    requests."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def client(self) -> Client:
        return Client("http://api", tenant_id="acme", retries=NO_WAIT, transport=httpx.MockTransport(self))

    def async_client(self) -> AsyncClient:
        return AsyncClient("http://api", tenant_id="acme", retries=NO_WAIT, transport=httpx.MockTransport(self))

    def sent(self, i: int = -1) -> Any:
        return json.loads(self.requests[i].content)


def unsent() -> WorkflowBuilder[None]:
    """A builder whose submit would fail the test: for what is checked before anything is sent."""

    def send(call: Any) -> None:
        raise AssertionError(f"sent {call}")

    return WorkflowBuilder(send, "k", tenant_id="acme")


# --- the body ---------------------------------------------------------------------------------------------


def test_the_body_is_the_contracts_steps_with_typed_payloads_encoded() -> None:
    api = Api()
    with api.client() as client:
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
    assert api.requests == []  # nothing is sent before submit
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
    build: Callable[[WorkflowBuilder[None]], Any], says: str
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


def afters(flow: WorkflowBuilder[Any]) -> dict[str, list[str]]:
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


def test_submit_posts_the_body_and_returns_the_workflow() -> None:
    api = Api(httpx.Response(201, json=workflow_body()))
    with api.client() as client:
        flow = client.workflow("etl-2026-12-06", name="nightly-etl")
        flow.fan_in([flow.step("extract", extract, Day("d"))], flow.step("load", load, {}))
        made = flow.submit()
    assert (api.requests[0].method, api.requests[0].url.path) == ("POST", "/workflows")
    assert api.sent() == flow.body()
    assert isinstance(made, Workflow)
    assert (made.id, made.status, made.name, made.step_count, made.finished) == (
        WORKFLOW_ID,
        "running",
        "nightly-etl",
        2,
        False,
    )
    assert made.counts == {"completed": 1, "waiting": 1}
    assert made.step("load").after == ["extract"]
    assert made.created_at == datetime(2026, 12, 6, 2, tzinfo=UTC)


def test_a_taken_key_is_a_duplicate_workflow_naming_the_holder() -> None:
    taken = {"error": "a workflow with idempotencyKey 'k' already exists", "workflowId": WORKFLOW_ID}
    api = Api(httpx.Response(409, json=taken))
    with api.client() as client:
        flow = client.workflow("k")
        flow.step("only", "noop")
        with pytest.raises(DuplicateWorkflow) as refused:
            flow.submit()
    assert isinstance(refused.value, Conflict)
    assert (refused.value.workflow_id, refused.value.status) == (WORKFLOW_ID, 409)
    assert len(api.requests) == 1


def test_a_resent_submit_whose_first_try_landed_returns_that_workflow() -> None:
    taken = {"error": "a workflow with idempotencyKey 'k' already exists", "workflowId": WORKFLOW_ID}
    api = Api(httpx.ReadTimeout("lost"), httpx.Response(409, json=taken), httpx.Response(200, json=workflow_body()))
    with api.client() as client:
        flow = client.workflow("k")
        flow.step("only", "noop")
        made = flow.submit()
    assert made.id == WORKFLOW_ID
    assert [(r.method, r.url.path) for r in api.requests] == [
        ("POST", "/workflows"),
        ("POST", "/workflows"),
        ("GET", f"/workflows/{WORKFLOW_ID}"),
    ]
    assert api.sent(0) == api.sent(1)  # the same key both times


def test_the_async_client_awaits_the_same_builder() -> None:
    taken = {"error": "exists", "workflowId": WORKFLOW_ID}
    api = Api(
        httpx.ConnectError("refused"),
        httpx.Response(201, json=workflow_body()),
        httpx.Response(409, json=taken),
        httpx.Response(202, json=workflow_body(status="running")),
    )

    async def scenario() -> tuple[Workflow, Workflow]:
        async with api.async_client() as client:
            flow = client.workflow("k")
            flow.step("extract", extract, Day("d"))
            made = await flow.submit()
            with pytest.raises(DuplicateWorkflow):  # not resent: another call holds the key
                await flow.submit()
            return made, await client.cancel_workflow(WORKFLOW_ID)

    made, cancelled = asyncio.run(scenario())
    assert made.id == cancelled.id == WORKFLOW_ID
    assert api.sent(1)["steps"] == [{"name": "extract", "jobType": "extract", "payload": {"day": "d", "rows": 0}}]
    assert (api.requests[-1].method, api.requests[-1].url.path) == ("DELETE", f"/workflows/{WORKFLOW_ID}")


def test_get_list_and_cancel() -> None:
    listed = {key: value for key, value in workflow_body(stepCount=2).items() if key != "steps"}
    api = Api(
        httpx.Response(200, json=workflow_body(status="succeeded")),
        httpx.Response(200, json=[listed]),
        httpx.Response(200, json=[]),
        httpx.Response(200, json=workflow_body(status="cancelled")),
        httpx.Response(404, json={"error": f"workflow {WORKFLOW_ID} not found"}),
    )
    with api.client() as client:
        assert client.get_workflow(WORKFLOW_ID).finished
        page = client.workflows(limit=50)
        assert (page[0].steps, page[0].step_count) == ([], 2)
        assert client.workflows("other", before=page[-1]) == []
        assert client.cancel_workflow(WORKFLOW_ID).status == "cancelled"
        with pytest.raises(NotFound, match="not found"):
            client.get_workflow(WORKFLOW_ID)
    assert [(r.method, r.url.path, dict(r.url.params)) for r in api.requests] == [
        ("GET", f"/workflows/{WORKFLOW_ID}", {}),
        ("GET", "/workflows", {"tenantId": "acme", "limit": "50"}),
        ("GET", "/workflows", {"tenantId": "other", "before": WORKFLOW_ID}),
        ("DELETE", f"/workflows/{WORKFLOW_ID}", {}),
        ("GET", f"/workflows/{WORKFLOW_ID}", {}),
    ]


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
