"""`jobsched workflows list|get|cancel` (jobsched/commands): the arguments, the client call each makes and what
it prints, a table or the API's JSON, against an httpx.MockTransport standing in for the API."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from jobsched.client import Client, Retries
from jobsched.commands import GROUPS, is_operator_command
from jobsched.commands.parser import parser
from jobsched.commands.run import WORKFLOW_PAGE, run

WORKFLOW_ID = "6650f0c2a1b2c3d4e5f60718"


def workflow(number: int = 0, status: str = "running", steps: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": f"{number:024x}",
        "tenantId": "acme",
        "idempotencyKey": f"etl-{number}",
        "name": "nightly-etl",
        "createdAt": "2026-12-06T02:00:00Z",
        "status": status,
        "counts": {"completed": 1, "running": 1, "dlq": 0},
    }
    if not steps:
        return {**body, "stepCount": 2}
    return {
        **body,
        "steps": [
            {"name": "extract", "jobId": "a" * 24, "jobType": "extract", "after": [], "status": "completed"},
            {"name": "load", "jobId": "b" * 24, "jobType": "load", "after": ["extract"], "status": "running"},
        ],
    }


class Api:
    """The workflows of the API: a listing newest first (ids count down), and each request kept."""

    def __init__(self, listing: list[dict[str, Any]] | None = None) -> None:
        self.listing = listing or []
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.path == "/workflows":
            params = request.url.params
            before = params.get("before")
            older = [w for w in self.listing if before is None or int(w["id"], 16) < int(before, 16)]
            return httpx.Response(200, json=older[: int(params.get("limit", 50))])
        if request.method == "DELETE":
            return httpx.Response(202, json=workflow(status="running"))
        return httpx.Response(200, json=workflow())

    def command(self, *args: str) -> str:
        parsed = parser("jobsched").parse_args(list(args))
        transport = httpx.MockTransport(self)
        with Client("http://api", tenant_id="acme", retries=Retries(attempts=1), transport=transport) as client:
            return run(client, parsed)


def test_workflows_is_an_operator_group() -> None:
    assert "workflows" in GROUPS
    assert is_operator_command(["--output", "json", "workflows", "list"])
    args = parser("jobsched").parse_args(["workflows", "get", WORKFLOW_ID, "-o", "json"])
    assert (args.group, args.command, args.workflow_id, args.output) == ("workflows", "get", WORKFLOW_ID, "json")
    with pytest.raises(SystemExit):
        parser("jobsched").parse_args(["workflows", "list", "--status", "completed"])  # a job's status


def test_list_prints_a_table_or_the_apis_json() -> None:
    api = Api([workflow(2, steps=False), workflow(1, "failed", steps=False)])
    lines = api.command("workflows", "list").splitlines()
    assert lines[0].split() == ["id", "tenantId", "name", "status", "steps", "counts", "createdAt"]
    assert lines[2].split() == [
        f"{1:024x}",
        "acme",
        "nightly-etl",
        "failed",
        "2",
        "completed:1,running:1",
        "2026-12-06T02:00:00Z",
    ]
    assert json.loads(api.command("workflows", "list", "--output", "json", "--limit", "1")) == [api.listing[0]]
    assert dict(api.requests[-1].url.params) == {"tenantId": "acme", "limit": "1"}
    api.command("workflows", "list", "--before", f"{2:024x}")
    assert api.requests[-1].url.params["before"] == f"{2:024x}"


def test_list_by_status_reads_older_pages_until_it_has_enough() -> None:
    statuses = ["running", "failed", "succeeded"]
    listing = [workflow(n, statuses[n % 3], steps=False) for n in range(3 * WORKFLOW_PAGE, 0, -1)]
    api = Api(listing)
    shown = json.loads(api.command("workflows", "list", "--status", "failed", "--limit", "40", "-o", "json"))
    assert len(shown) == 40
    assert {w["status"] for w in shown} == {"failed"}
    assert [w["id"] for w in shown] == [w["id"] for w in listing if w["status"] == "failed"][:40]
    assert len(api.requests) == 3  # 50 a page, 16 or 17 failed in each
    few = json.loads(api.command("workflows", "list", "--status", "failed", "--limit", "1000", "-o", "json"))
    assert len(few) == WORKFLOW_PAGE  # every failed one, then an empty page ends it


def test_get_prints_the_workflow_then_its_steps() -> None:
    api = Api()
    shown = api.command("workflows", "get", WORKFLOW_ID)
    head, steps = shown.split("\n\n")
    assert "idempotencyKey  etl-0" in head
    assert "status          running" in head
    assert [line.split() for line in steps.splitlines()] == [
        ["step", "jobId", "jobType", "status", "after"],
        ["extract", "a" * 24, "extract", "completed", "-"],
        ["load", "b" * 24, "load", "running", "extract"],
    ]
    assert (api.requests[0].method, api.requests[0].url.path) == ("GET", f"/workflows/{WORKFLOW_ID}")


def test_cancel_deletes_and_prints_the_workflow() -> None:
    api = Api()
    assert json.loads(api.command("workflows", "cancel", WORKFLOW_ID, "-o", "json")) == workflow()
    assert (api.requests[0].method, api.requests[0].url.path) == ("DELETE", f"/workflows/{WORKFLOW_ID}")
