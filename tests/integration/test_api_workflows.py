"""The workflow endpoints on both stores and in both authentication modes: a workflow stored whole (its steps'
jobs, roots pending, the rest waiting), read with every step's status, listed newest first, cancelled as one; bad
input a 400 naming the step with nothing stored; another tenant's workflow a 404."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from services.api.app import create_app
from shared.store.base import JobStore, NewStep, NewWorkflow
from shared.store.mongo import MongoJobStore
from shared.workflows import MAX_STEPS
from tests.contract.store_kit import claim_one, new, reload, start
from tests.contract.test_store_mongo_workflows import half_written
from tests.support import LOCAL, backend_beside

NOW = "2026-01-01T00:00:00Z"


def body(key: str = "etl-1", **overrides: Any) -> dict[str, Any]:
    steps = [
        {"name": "extract", "jobType": "noop", "payload": {"table": "orders"}},
        {"name": "left", "jobType": "log-message", "payload": {"message": "l"}, "after": ["extract"]},
        {"name": "right", "jobType": "log-message", "payload": {"message": "r"}, "after": ["extract"]},
        {"name": "load", "jobType": "noop", "after": ["left", "right"], "onParentFailure": "run", "priority": 7},
    ]
    return {"idempotencyKey": key, "tenantId": "tenant-a", "name": "nightly", "scheduledAt": NOW, "steps": steps} | (
        overrides
    )


def created(api: TestClient, **overrides: Any) -> dict[str, Any]:
    response = api.post("/workflows", json=body(**overrides))
    assert response.status_code == 201, response.text
    workflow: dict[str, Any] = response.json()
    return workflow


def test_a_workflow_is_created_whole_and_read_with_its_steps(api: TestClient) -> None:
    workflow = created(api)
    assert workflow["status"] == "running"
    assert (workflow["name"], workflow["stepCount"]) == ("nightly", 4)
    assert workflow["counts"] == {"pending": 1, "waiting": 3}
    steps = {s["name"]: s for s in workflow["steps"]}
    assert {name: s["status"] for name, s in steps.items()} == {
        "extract": "pending",
        "left": "waiting",
        "right": "waiting",
        "load": "waiting",
    }
    assert steps["load"]["after"] == ["left", "right"]
    load = api.get(f"/jobs/{steps['load']['jobId']}").json()
    assert (load["workflowId"], load["step"], load["priority"], load["onParentFailure"]) == (
        workflow["id"],
        "load",
        7,
        "run",
    )
    assert load["dependsOn"] == [steps["left"]["jobId"], steps["right"]["jobId"]]
    assert api.get(f"/workflows/{workflow['id'].upper()}").json() == workflow


def test_the_same_key_is_a_409_naming_the_workflow_and_stores_nothing_more(api: TestClient) -> None:
    first = created(api)
    again = api.post("/workflows", json=body())
    assert again.status_code == 409
    assert again.json() == {"error": "a workflow with idempotencyKey 'etl-1' already exists", "workflowId": first["id"]}
    assert len(api.get("/jobs", params={"tenantId": "tenant-a"}).json()) == 4


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda steps: steps[3].update(after=["left", "rigth"]), "steps[3] (load): after: no step named 'rigth'"),
        (lambda steps: steps[0].update(after=["load"]), "steps[0] (extract): waits for itself through a cycle"),
        (lambda steps: steps[1].update(after=["left"]), "steps[1] (left): after: a job cannot wait for itself"),
        (lambda steps: steps[2].update(name="left"), "steps[2] (left): a step of this name comes earlier (steps[1])"),
        (lambda steps: steps[1].update(jobType="nope"), "steps[1] (left): jobType: unknown jobType 'nope'"),
        (lambda steps: steps[1].update(cron="* * * * *"), "steps[1] (left): cron: a step cannot set it"),
        (lambda steps: steps[0].update(onParentFailure="run"), "steps[0] (extract): onParentFailure applies only"),
        (lambda steps: steps[1].update(maxAttempts="3"), "steps[1] (left): maxAttempts"),
        (lambda steps: steps[1].pop("name"), "steps[1]: name: a string of 1 to 100 characters is required"),
        (lambda steps: steps[3].update(after=["left"] * 2), "steps[3] (load): after names a job twice"),
    ],
)
def test_a_bad_step_is_a_400_naming_it_and_nothing_is_stored(api: TestClient, change: Any, error: str) -> None:
    request = body()
    change(request["steps"])
    response = api.post("/workflows", json=request)
    assert response.status_code == 400, response.text
    assert error in response.json()["error"]
    assert api.get("/jobs", params={"tenantId": "tenant-a"}).json() == []
    assert api.get("/workflows", params={"tenantId": "tenant-a"}).json() == []


def test_a_step_of_any_shape_is_a_400_never_a_500(api: TestClient) -> None:
    for step in ({"name": "a", "jobType": ["x"]}, {"name": "a", "jobType": {"x": 1}}, "a", None, 7):
        response = api.post("/workflows", json=body(steps=[step]))
        assert response.status_code == 400, (step, response.text)
        assert response.json()["error"].startswith(("steps[0]", "steps.0")), response.text
    for steps in ({"a": 1}, "steps", None):
        assert api.post("/workflows", json=body(steps=steps)).status_code == 400


def test_a_workflow_being_written_cannot_be_cancelled_yet(mongo_store: MongoJobStore) -> None:
    cut = half_written(mongo_store, "being-written", 2)  # on MongoDB: its create died halfway
    app = create_app(backend_beside(mongo_store))
    with TestClient(app, raise_server_exceptions=False, base_url=LOCAL) as client:
        assert client.get(f"/workflows/{cut}").json()["status"] == "creating"
        answer = client.delete(f"/workflows/{cut}")
    assert answer.status_code == 409
    assert answer.json() == {"error": f"workflow {cut} is being written; cancel it once it is running"}


def test_too_many_steps_or_none_is_a_400(api: TestClient) -> None:
    steps = [{"name": f"s{n}", "jobType": "noop"} for n in range(MAX_STEPS + 1)]
    response = api.post("/workflows", json=body(steps=steps))
    assert response.status_code == 400
    assert f"steps: List should have at most {MAX_STEPS} items" in response.json()["error"]
    assert api.post("/workflows", json=body(steps=[])).status_code == 400
    assert api.post("/workflows", json=[]).json() == {"error": "the body must be a JSON object"}


def test_workflows_are_listed_newest_first_without_their_steps(api: TestClient, auth_mode: str) -> None:
    made = [created(api, idempotencyKey=f"w{n}")["id"] for n in range(3)]
    listed = api.get("/workflows", params={"tenantId": "tenant-a", "limit": "2"}).json()
    assert [w["id"] for w in listed] == made[::-1][:2]
    assert all("steps" not in w and w["stepCount"] == 4 and w["status"] == "running" for w in listed)
    rest = api.get("/workflows", params={"tenantId": "tenant-a", "before": listed[-1]["id"]}).json()
    assert [w["id"] for w in rest] == made[:1]
    if auth_mode == "off":  # with a key, its tenant is the one asked for
        assert api.get("/workflows").json() == {"error": "tenantId is required"}
    assert api.get("/workflows", params={"tenantId": "tenant-a", "before": "x"}).status_code == 400


def test_cancelling_a_workflow_cancels_its_unfinished_steps(api: TestClient, api_store: JobStore) -> None:
    workflow = created(api)
    steps = {s["name"]: s["jobId"] for s in workflow["steps"]}
    extract = reload(api_store, steps["extract"])
    running = start(api_store, claim_one(api_store, extract))  # a step an executor runs: its cancel is a request
    answer = api.delete(f"/workflows/{workflow['id']}")
    assert answer.status_code == 202, answer.text
    cancelled = answer.json()
    assert cancelled["counts"] == {"running": 1, "cancelled": 3}
    assert api.get(f"/jobs/{running.id}").json()["cancelRequested"] is True
    # `load` runs whatever its parents do (onParentFailure: run), yet it was cancelled before its parents were.
    assert api.get(f"/jobs/{steps['load']}").json()["status"] == "cancelled"
    assert api.delete(f"/workflows/{workflow['id']}").status_code == 202  # again: nothing more to cancel


def test_a_missing_or_other_tenants_workflow_is_a_404(api: TestClient, api_store: JobStore, auth_mode: str) -> None:
    other = api_store.create_workflow(
        NewWorkflow("tenant-b", "theirs", (NewStep("only", new(tenantId="tenant-b")),))
    ).workflow
    unknown = "0123456789abcdef01234567"
    assert api.get(f"/workflows/{unknown}").json() == {"error": f"workflow {unknown} not found"}
    assert api.get("/workflows/nope").status_code == 400
    if auth_mode == "required":  # the key is tenant-a's: tenant-b's workflow reads as none, and cannot be cancelled
        assert api.get(f"/workflows/{other.id}").status_code == 404
        assert api.delete(f"/workflows/{other.id}").status_code == 404
        assert api.get("/workflows", params={"tenantId": "tenant-b"}).status_code == 403
        assert api.post("/workflows", json=body(tenantId="tenant-b")).status_code == 403
        assert reload(api_store, other.steps[0].jobId).status.value == "pending"
    else:
        assert api.get(f"/workflows/{other.id}").json()["tenantId"] == "tenant-b"


# --- schedules firing a workflow ----------------------------------------------------------------------------------


def scheduled(**overrides: Any) -> dict[str, Any]:
    """body() as a schedule: every night at 2 in Paris, skipping a night while the last run is not over."""
    nightly = {k: v for k, v in body(**overrides).items() if k != "scheduledAt"}
    return {"cron": "0 2 * * *", "timezone": "Europe/Paris", "overlap": "skip"} | nightly


def test_a_workflow_with_cron_is_a_schedule_whose_trigger_writes_the_workflow(api: TestClient) -> None:
    response = api.post("/workflows", json=scheduled())
    assert response.status_code == 201, response.text
    tpl = response.json()
    assert (tpl["jobType"], tpl["cron"], tpl["timezone"], tpl["overlap"]) == (
        "jobsched.workflow",
        "0 2 * * *",
        "Europe/Paris",
        "skip",
    )
    assert [s["name"] for s in tpl["payload"]["steps"]] == ["extract", "left", "right", "load"]
    assert tpl["payload"]["steps"][3]["after"] == ["left", "right"]
    again = api.post("/workflows", json=scheduled())
    assert (again.status_code, again.json()["jobId"]) == (409, tpl["id"])

    run = api.post(f"/jobs/{tpl['id']}/trigger", json={"idempotencyKey": "by-hand"})
    assert run.status_code == 201, run.text
    root = run.json()
    assert (root["step"], root["templateId"], root["status"]) == ("extract", tpl["id"], "pending")
    workflow = api.get(f"/workflows/{root['workflowId']}").json()
    assert (workflow["name"], workflow["stepCount"], workflow["counts"]) == ("nightly", 4, {"pending": 1, "waiting": 3})
    runs = api.get(f"/jobs/{tpl['id']}/runs").json()
    assert sorted(r["step"] for r in runs) == ["extract", "left", "load", "right"]


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"overlap": "buffer_one"}, "a workflow schedule takes allow_all or skip"),
        ({"overlap": "cancel_other"}, "a workflow schedule takes allow_all or skip"),
        ({"scheduledAt": NOW}, "scheduledAt: a workflow schedule's steps are due at each of its fire times"),
        ({"cron": "61 * * * *"}, "cron"),
        ({"timezone": "Mars/Olympus"}, "Mars/Olympus"),
        ({"interval": "1m"}, "exactly one of"),
    ],
)
def test_a_bad_workflow_schedule_is_a_400_and_nothing_is_stored(api: TestClient, change: Any, error: str) -> None:
    response = api.post("/workflows", json=scheduled() | change)
    assert response.status_code == 400, response.text
    assert error in response.json()["error"]
    assert api.get("/jobs", params={"tenantId": "tenant-a"}).json() == []


def test_schedule_fields_without_a_schedule_are_a_400(api: TestClient) -> None:
    for fields in ({"overlap": "skip"}, {"timezone": "Europe/Paris"}, {"pauseOnFailure": True}):
        response = api.post("/workflows", json=body() | fields)
        assert response.status_code == 400, response.text
        assert "apply only to a workflow schedule" in response.json()["error"]


def test_a_workflow_schedules_type_is_its_own(api: TestClient) -> None:
    tpl = api.post("/workflows", json=scheduled()).json()
    step_due = scheduled()
    step_due["steps"][0]["scheduledAt"] = NOW
    assert "steps[0] (extract): scheduledAt" in api.post("/workflows", json=step_due).json()["error"]
    by_hand = {"idempotencyKey": "x", "tenantId": "tenant-a", "jobType": "jobsched.workflow", "cron": "* * * * *"}
    refused = api.post("/jobs", json=by_hand)
    assert (refused.status_code, "POST /workflows" in refused.json()["error"]) == (400, True)
    patched = api.patch(f"/jobs/{tpl['id']}", json={"payload": {"steps": []}})
    assert (patched.status_code, "POST /workflows" in patched.json()["error"]) == (400, True)
    buffered = api.patch(f"/jobs/{tpl['id']}", json={"overlap": "buffer_all"})
    assert (buffered.status_code, "allow_all or skip" in buffered.json()["error"]) == (400, True)
    assert api.patch(f"/jobs/{tpl['id']}", json={"cron": "0 3 * * *"}).json()["cron"] == "0 3 * * *"
    budget = api.patch(f"/jobs/{tpl['id']}", json={"maxAttempts": 9})
    assert (budget.status_code, "steps keep their own" in budget.json()["error"]) == (400, True)
    with_payload = api.post(f"/jobs/{tpl['id']}/trigger", json={"payload": {"a": 1}})
    assert (with_payload.status_code, "runs take no payload" in with_payload.json()["error"]) == (400, True)
    triggered = api.post(f"/jobs/{tpl['id']}/trigger", json={"overlap": "cancel_other"})
    assert (triggered.status_code, "allow_all or skip" in triggered.json()["error"]) == (400, True)
    window = {"from": "2026-01-01T00:00:00Z", "to": "2026-01-03T00:00:00Z", "overlap": "buffer_all"}
    backfilled = api.post(f"/jobs/{tpl['id']}/backfill", json=window)
    assert (backfilled.status_code, "allow_all or skip" in backfilled.json()["error"]) == (400, True)
    assert api.get(f"/jobs/{tpl['id']}/runs").json() == []
