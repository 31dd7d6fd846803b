"""POST /jobs/batch on both stores, with AUTH=off and AUTH=required: each job answered on its own, one bad job
refusing no other; a body that is not a batch refused whole and nothing stored; tenants kept apart."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from shared.keys.base import Role
from shared.model import MAX_PAYLOAD_BYTES, Status
from shared.store.base import JobStore
from tests.integration.test_api import job_body
from tests.integration.test_api_auth import Secured, secured  # noqa: F401 (a fixture)
from tests.support import tenant_jobs


def batch(*jobs: Any, **envelope: Any) -> dict[str, Any]:
    return {**envelope, "jobs": list(jobs)}


def test_each_job_is_answered_in_order_and_a_bad_one_refuses_no_other(api: TestClient, api_store: JobStore) -> None:
    held = api.post("/jobs", json=job_body(idempotencyKey="held")).json()
    response = api.post(
        "/jobs/batch",
        json=batch(
            job_body(idempotencyKey="b-1", priority=2),
            job_body(idempotencyKey="held"),
            job_body(idempotencyKey="b-2", jobType="no-such-type"),
            job_body(idempotencyKey="b-3", scheduledAt="yesterday"),
            job_body(idempotencyKey="b-4", payload={"blob": "x" * MAX_PAYLOAD_BYTES}),
            "not a job",
            job_body(idempotencyKey="b-1"),
            job_body(idempotencyKey="b-5", cron="*/5 * * * *", scheduledAt=None),
        ),
    )
    assert response.status_code == 200, response.text
    body = response.json()
    results = body["results"]
    assert [r["status"] for r in results] == [201, 409, 400, 400, 413, 400, 409, 201]
    assert (body["created"], body["duplicates"], body["refused"]) == (2, 2, 4)
    assert results[1]["id"] == held["id"]
    assert results[6]["id"] == results[0]["id"]  # held by the batch's own first job
    assert "no-such-type" in results[2]["error"]
    assert "scheduledAt" in results[3]["error"]
    assert "payload" in results[4]["error"]
    assert "JSON object" in results[5]["error"]
    created = api.get(f"/jobs/{results[0]['id']}").json()
    assert (created["idempotencyKey"], created["priority"], created["status"]) == ("b-1", 2, "pending")
    template = api.get(f"/jobs/{results[7]['id']}").json()
    assert template["cron"] == "*/5 * * * *"
    keys = {j.idempotencyKey for j in tenant_jobs(api_store, "tenant-a")}
    assert keys == {"held", "b-1", "b-5"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([job_body()], "JSON object"),
        ({}, "non-empty array"),
        ({"jobs": []}, "non-empty array"),
        ({"jobs": {"a": 1}}, "non-empty array"),
        ({"jobs": [job_body()], "priority": 3}, "unknown field"),
        ({"jobs": [job_body()], "tenantId": ""}, "non-empty string"),
        ({"jobs": [job_body(idempotencyKey=f"k{i}") for i in range(1001)]}, "at most 1000"),
    ],
)
def test_a_body_that_is_not_a_batch_is_refused_whole(
    api: TestClient, api_store: JobStore, body: Any, message: str
) -> None:
    response = api.post("/jobs/batch", json=body)
    assert response.status_code == 400, response.text
    assert message in response.json()["error"]
    assert tenant_jobs(api_store, "tenant-a") == []


def test_jobs_without_a_tenant_take_the_batch_s(api: TestClient, api_store: JobStore) -> None:
    response = api.post(
        "/jobs/batch", json=batch(job_body(idempotencyKey="t-1", tenantId=None), tenantId="tenant-a")
    ).json()
    assert [r["status"] for r in response["results"]] == [201]
    [job] = tenant_jobs(api_store, "tenant-a")
    assert job.idempotencyKey == "t-1"
    assert job.status is Status.PENDING


def test_a_key_creates_only_in_its_own_tenant(secured: Secured) -> None:  # noqa: F811 (the fixture)
    with secured.client(secured.key("tenant-a")) as client:
        no_tenant = client.post("/jobs/batch", json=batch(job_body(idempotencyKey="own", tenantId=None)))
        assert no_tenant.status_code == 200, no_tenant.text
        assert [r["status"] for r in no_tenant.json()["results"]] == [201]
        for hostile in (
            batch(job_body(idempotencyKey="x", tenantId=None), tenantId="tenant-b"),
            batch(job_body(idempotencyKey="y"), job_body(idempotencyKey="z", tenantId="tenant-b")),
        ):
            refused = client.post("/jobs/batch", json=hostile)
            assert refused.status_code == 403, refused.text
            assert "tenant-b" in refused.json()["error"]
    with secured.client(secured.key("tenant-b", Role.READER)) as reader:
        assert reader.post("/jobs/batch", json=batch(job_body(tenantId="tenant-b"))).status_code == 403
    assert [j.idempotencyKey for j in tenant_jobs(secured.store, "tenant-a")] == ["own"]
    assert tenant_jobs(secured.store, "tenant-b") == []
