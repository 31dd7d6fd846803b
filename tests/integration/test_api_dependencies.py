"""POST /jobs with dependsOn on both stores: the job is `waiting` until its parents complete, lists them, and a
request naming a job it cannot wait for is a 400 naming that job, with nothing stored."""

from __future__ import annotations

from typing import Any

import pytest
from bson import ObjectId
from starlette.testclient import TestClient

from shared.store.base import JobStore
from tests.contract.store_kit import new
from tests.integration.test_api import job_body

NOW = "2026-01-01T00:00:00Z"


def created(api: TestClient, **body: Any) -> dict[str, Any]:
    response = api.post("/jobs", json=job_body(**{"scheduledAt": NOW, **body}))
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()
    return job


def test_a_job_with_parents_waits_and_lists_them(api: TestClient) -> None:
    parent = created(api, idempotencyKey="parent", scheduledAt="2099-01-01T00:00:00Z")
    child = created(api, idempotencyKey="child", dependsOn=[parent["id"].upper()], onParentFailure="run")
    assert child["status"] == "waiting"
    assert child["dependsOn"] == [parent["id"]]
    assert child["onParentFailure"] == "run"
    assert api.get(f"/jobs/{child['id']}").json() == child
    assert [j["id"] for j in api.get("/jobs", params={"tenantId": "tenant-a", "status": "waiting"}).json()] == [
        child["id"]
    ]

    assert api.delete(f"/jobs/{parent['id']}").status_code == 200  # cancelled: under `run`, the child runs
    assert api.get(f"/jobs/{child['id']}").json()["status"] == "pending"


@pytest.mark.parametrize(
    ("depends_on", "policy", "error"),
    [
        (["not-an-id"], None, "dependsOn.0: must be a job id (24 hex digits)"),
        ([str(ObjectId())] * 2, None, "dependsOn names a job twice"),
        ([str(ObjectId()) for _ in range(101)], None, "dependsOn: List should have at most 100 items"),
        ([], "cancel", "onParentFailure applies only to a job with dependsOn"),
        (None, "later", "onParentFailure: Input should be 'cancel' or 'run'"),
    ],
)
def test_a_malformed_dependency_is_a_400(
    api: TestClient, depends_on: list[str] | None, policy: str | None, error: str
) -> None:
    response = api.post("/jobs", json=job_body(dependsOn=depends_on, onParentFailure=policy))
    assert response.status_code == 400
    assert error in response.json()["error"]
    assert api.get("/jobs", params={"tenantId": "tenant-a"}).json() == []


def test_a_template_cannot_wait(api: TestClient) -> None:
    parent = created(api, idempotencyKey="parent")
    body = job_body(scheduledAt=None, cron="0 3 * * *", dependsOn=[parent["id"]])
    response = api.post("/jobs", json=body)
    assert response.status_code == 400
    assert "dependsOn and onParentFailure apply only to one-off jobs" in response.json()["error"]


def test_a_parent_the_tenant_cannot_wait_for_is_a_400_naming_it(api: TestClient, api_store: JobStore) -> None:
    other = api_store.create(new(tenantId="tenant-b")).to_wire()
    template = created(api, idempotencyKey="template", scheduledAt=None, cron="0 3 * * *")
    missing = str(ObjectId())
    for parent, why in (
        (other["id"], "not found"),
        (missing, "not found"),
        (template["id"], "is a recurring template"),
    ):
        response = api.post("/jobs", json=job_body(idempotencyKey="refused", dependsOn=[parent]))
        assert response.status_code == 400
        assert response.json()["error"].startswith(f"dependsOn: job {parent} {why}")
    assert api.get("/jobs", params={"tenantId": "tenant-a", "status": "waiting"}).json() == []


def test_the_batch_endpoint_answers_each_dependency_on_its_own(api: TestClient) -> None:
    parent = created(api, idempotencyKey="parent")
    missing = str(ObjectId())
    jobs = [
        job_body(idempotencyKey="waits", dependsOn=[parent["id"]]),
        job_body(idempotencyKey="refused", dependsOn=[missing]),
    ]
    response = api.post("/jobs/batch", json={"jobs": jobs})
    assert response.status_code == 200, response.text
    answers = response.json()["results"]
    assert answers[0]["status"] == 201
    assert api.get(f"/jobs/{answers[0]['id']}").json()["status"] == "waiting"
    assert answers[1]["status"] == 400
    assert f"dependsOn: job {missing} not found" in answers[1]["error"]


def step(key: str, *after: str, **fields: Any) -> dict[str, Any]:
    return job_body(idempotencyKey=key, scheduledAt=NOW, dependsOnKeys=list(after) or None, **fields)


def test_a_batch_creates_a_graph_its_jobs_name_by_key(api: TestClient) -> None:
    graph = [
        step("load", "transform-1", "transform-2", "transform-3"),  # parents after their dependent: any order
        *(step(f"transform-{n}", "extract") for n in (1, 2, 3)),
        step("extract"),
    ]
    response = api.post("/jobs/batch", json={"jobs": graph})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["status"] for r in results] == [201] * 5
    ids = {body["idempotencyKey"]: r["id"] for body, r in zip(graph, results, strict=True)}
    load = api.get(f"/jobs/{ids['load']}").json()
    assert load["status"] == "waiting"
    assert load["dependsOn"] == [ids[f"transform-{n}"] for n in (1, 2, 3)]
    assert api.get(f"/jobs/{ids['transform-2']}").json()["dependsOn"] == [ids["extract"]]
    assert api.get(f"/jobs/{ids['extract']}").json()["status"] == "pending"

    again = api.post("/jobs/batch", json={"jobs": graph}).json()["results"]  # sent again: every key decides
    assert [(r["status"], r["id"]) for r in again] == [(409, r["id"]) for r in results]


def test_a_batch_refuses_a_job_whose_parent_it_could_not_create(api: TestClient) -> None:
    graph = [
        step("bad-parent", jobType="no-such-type"),
        step("after-bad", "bad-parent"),
        step("a", "b"),
        step("b", "a"),
        step("not-in-batch", "elsewhere"),
        step("self", "self"),
        step("fine"),
        step("after-fine", "fine"),
    ]
    results = api.post("/jobs/batch", json={"jobs": graph}).json()["results"]
    assert [r["status"] for r in results] == [400, 400, 400, 400, 400, 400, 201, 201]
    assert "no job of this batch with idempotencyKey 'bad-parent'" in results[1]["error"]
    assert "waiting in a cycle" in results[2]["error"]
    assert "idempotencyKey 'elsewhere'" in results[4]["error"]
    assert "a job cannot wait for itself" in results[5]["error"]
    listed = api.get("/jobs", params={"tenantId": "tenant-a"}).json()
    assert sorted(j["idempotencyKey"] for j in listed) == ["after-fine", "fine"]


def test_a_single_create_cannot_name_parents_by_key(api: TestClient) -> None:
    response = api.post("/jobs", json=step("alone", "somewhere"))
    assert response.status_code == 400
    assert "send the jobs together to POST /jobs/batch" in response.json()["error"]
