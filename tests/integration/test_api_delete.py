"""POST /jobs/{id}/delete on both stores and both auth modes: a finished job or template goes, with its attempt
records, and its idempotency key is free again; anything underway is refused and kept."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from shared.keys.base import KeyStore, Role
from shared.keys.manage import issue_key
from shared.model import Outcome
from shared.store.base import JobStore
from tests.contract.store_kit import result, start

ONE_OFF = {"tenantId": "tenant-a", "jobType": "noop", "scheduledAt": "2030-01-01T00:00:00Z"}
NIGHTLY = {"tenantId": "tenant-a", "jobType": "noop", "cron": "0 2 * * *"}


def created(api: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    response = api.post("/jobs", json=body)
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()
    return job


def test_a_cancelled_job_is_deleted_and_its_key_used_again(api: TestClient) -> None:
    job = created(api, {**ONE_OFF, "idempotencyKey": "welcome-42"})
    assert api.delete(f"/jobs/{job['id']}").json()["status"] == "cancelled"

    taken = api.post("/jobs", json={**ONE_OFF, "idempotencyKey": "welcome-42"})
    assert taken.status_code == 409
    assert f"POST /jobs/{job['id']}/delete frees the key" in taken.json()["error"]

    deleted = api.post(f"/jobs/{job['id']}/delete")
    assert deleted.status_code == 200, deleted.text
    assert deleted.json() == {
        "id": job["id"],
        "idempotencyKey": "welcome-42",
        "status": "cancelled",
        "deleted": True,
        "runsDeleted": 0,
    }
    assert api.get(f"/jobs/{job['id']}").status_code == 404
    assert api.get(f"/jobs/{job['id']}/executions").status_code == 404
    again = created(api, {**ONE_OFF, "idempotencyKey": "welcome-42"})
    assert again["id"] != job["id"]
    assert api.post(f"/jobs/{job['id']}/delete").status_code == 404


def test_a_completed_job_goes_with_its_attempts(api: TestClient, api_store: JobStore) -> None:
    job = created(api, {**ONE_OFF, "idempotencyKey": "done", "scheduledAt": "2020-01-01T00:00:00Z"})
    [claimed] = api_store.claim_due_jobs(api_store.get(job["id"]).scheduledAt, 1, {"noop"})  # type: ignore[union-attr]
    api_store.finish_attempt(start(api_store, claimed), result(Outcome.SUCCEEDED))
    assert len(api.get(f"/jobs/{job['id']}/executions").json()) == 1
    assert api.post(f"/jobs/{job['id']}/delete").json()["status"] == "completed"
    assert api_store.list_executions(job["id"]) == []


def test_a_job_underway_is_refused_with_409_and_kept(api: TestClient) -> None:
    job = created(api, {**ONE_OFF, "idempotencyKey": "later"})
    refused = api.post(f"/jobs/{job['id']}/delete")
    assert refused.status_code == 409
    assert refused.json() == {"error": f"cannot delete job {job['id']}: it is pending"}
    assert api.get(f"/jobs/{job['id']}").json()["status"] == "pending"


def test_a_template_is_deleted_with_its_runs_once_none_is_underway(api: TestClient) -> None:
    template = created(api, {**NIGHTLY, "idempotencyKey": "nightly"})
    run = api.post(f"/jobs/{template['id']}/trigger", json={}).json()
    assert api.delete(f"/jobs/{template['id']}").status_code == 200

    refused = api.post(f"/jobs/{template['id']}/delete")
    assert refused.status_code == 409
    assert "1 of its runs have not finished" in refused.json()["error"]
    assert api.get(f"/jobs/{run['id']}").json()["status"] == "pending"

    assert api.delete(f"/jobs/{run['id']}").status_code == 200
    deleted = api.post(f"/jobs/{template['id']}/delete")
    assert (deleted.status_code, deleted.json()["runsDeleted"]) == (200, 1)
    assert api.get(f"/jobs/{run['id']}").status_code == 404
    assert created(api, {**NIGHTLY, "idempotencyKey": "nightly"})["id"] != template["id"]


@pytest.mark.parametrize("path", ["/jobs/not-an-id/delete", "/jobs/%00/delete"])
def test_a_malformed_id_is_400_or_404_never_500(api: TestClient, path: str) -> None:
    assert api.post(path).status_code in (400, 404)


@pytest.mark.parametrize("auth_mode", ["required"])  # without keys tenantId is self-declared
def test_another_tenants_job_is_not_found_and_kept(api: TestClient, api_keys: KeyStore) -> None:
    job = created(api, {**ONE_OFF, "idempotencyKey": "mine"})
    api.delete(f"/jobs/{job['id']}")
    other, _ = issue_key(api_keys, "tenant-b", Role.WRITER, "tests", by="tests")
    assert api.post(f"/jobs/{job['id']}/delete", headers={"Authorization": f"Bearer {other}"}).status_code == 404
    reader, _ = issue_key(api_keys, "tenant-a", Role.READER, "tests", by="tests")
    assert api.post(f"/jobs/{job['id']}/delete", headers={"Authorization": f"Bearer {reader}"}).status_code == 403
    assert api.get(f"/jobs/{job['id']}").json()["status"] == "cancelled"
