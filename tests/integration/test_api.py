"""The API contract (reference 001 "Jobs" and "Health") on both stores, with AUTH=off and with AUTH=required
(a writer key of tenant-a): authentication changes nothing a tenant's own requests see."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from starlette.testclient import TestClient

from shared.model import MAX_PAYLOAD_BYTES, Job, Outcome, Status
from shared.store.base import AttemptResult, AttemptStart, JobStore
from shared.store.mongo import MongoJobStore
from tests.integration.conftest import MakeApp
from tests.support import LOCAL, REPO_ROOT, start_one, tenant_jobs, wait_until

WHEN = "2026-09-29T18:00:00Z"


def job_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "idempotencyKey": "test-job-1",
        "tenantId": "tenant-a",
        "jobType": "log-message",
        "payload": {"message": "hello from the scheduler"},
        "priority": 5,
        "scheduledAt": WHEN,
        "maxAttempts": 3,
    }
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not None}


def test_create_returns_the_stored_pending_job(api: TestClient) -> None:
    response = api.post("/jobs", json=job_body())
    assert response.status_code == 201
    job = response.json()
    assert len(job["id"]) == 24
    assert {k: job[k] for k in ("idempotencyKey", "tenantId", "jobType", "payload", "priority")} == {
        "idempotencyKey": "test-job-1",
        "tenantId": "tenant-a",
        "jobType": "log-message",
        "payload": {"message": "hello from the scheduler"},
        "priority": 5,
    }
    assert job["status"] == "pending"
    assert job["scheduledAt"] == WHEN
    assert job["attempts"] == 0
    assert job["maxAttempts"] == 3
    assert job["createdAt"].endswith("Z")
    assert job["updatedAt"] == job["createdAt"]
    assert "cron" not in job
    assert api.get(f"/jobs/{job['id']}").json() == job


@pytest.mark.parametrize(("given", "stored"), [(None, 3), (0, 3), (-2, 3), (7, 7)])
def test_max_attempts_defaults_to_three_when_missing_or_not_positive(
    api: TestClient, given: int | None, stored: int
) -> None:
    response = api.post("/jobs", json=job_body(maxAttempts=given))
    assert response.status_code == 201
    assert response.json()["maxAttempts"] == stored


def test_defaults_priority_zero_and_empty_payload(api: TestClient) -> None:
    body = job_body(jobType="noop")
    del body["priority"], body["payload"]
    job = api.post("/jobs", json=body).json()
    assert job["priority"] == 0
    assert job["payload"] == {}


def test_scheduled_at_keeps_offsets_as_the_same_instant(api: TestClient) -> None:
    job = api.post("/jobs", json=job_body(scheduledAt="2026-09-29T20:00:00.250+02:00")).json()
    assert job["scheduledAt"] == "2026-09-29T18:00:00.250Z"


def test_duplicate_idempotency_key_is_409_naming_the_existing_job(api: TestClient) -> None:
    first = api.post("/jobs", json=job_body())
    assert first.status_code == 201
    response = api.post("/jobs", json=job_body(priority=9))
    assert response.status_code == 409
    assert "test-job-1" in response.json()["error"]
    assert response.json()["jobId"] == first.json()["id"]


def test_32_concurrent_creates_with_one_key_give_exactly_one_201(
    api_store: JobStore, make_app: MakeApp, api_headers: dict[str, str]
) -> None:
    async def create_32() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=make_app())
        async with httpx.AsyncClient(transport=transport, base_url=LOCAL, headers=api_headers) as client:
            return await asyncio.gather(*(client.post("/jobs", json=job_body()) for _ in range(32)))

    responses = asyncio.run(create_32())
    codes = sorted(r.status_code for r in responses)
    assert codes == [201] + [409] * 31, {r.text for r in responses if r.status_code not in (201, 409)}
    assert len(tenant_jobs(api_store, "tenant-a", None, 100)) == 1


def test_recurring_cron_template_gets_its_first_fire_time(api: TestClient) -> None:
    body = job_body(
        idempotencyKey="nightly-report", scheduledAt=None, cron="0 2 * * *", payload={"message": "nightly report run"}
    )
    response = api.post("/jobs", json=body)
    assert response.status_code == 201
    job = response.json()
    assert job["cron"] == "0 2 * * *"
    assert job["timezone"] == "UTC"
    assert job["status"] == "pending"
    first = datetime.fromisoformat(job["scheduledAt"])
    assert first > datetime.now(UTC)
    assert (first.hour, first.minute, first.second) == (2, 0, 0)
    assert first - datetime.now(UTC) <= timedelta(days=1)


def test_recurring_interval_and_timezone(api: TestClient) -> None:
    interval = api.post("/jobs", json=job_body(idempotencyKey="every-30s", scheduledAt=None, interval="30s")).json()
    assert interval["interval"] == "30s"
    gap = datetime.fromisoformat(interval["scheduledAt"]) - datetime.fromisoformat(interval["createdAt"])
    assert gap == timedelta(seconds=30)
    berlin = api.post(
        "/jobs", json=job_body(idempotencyKey="berlin", scheduledAt=None, cron="0 9 * * *", timezone="Europe/Berlin")
    ).json()
    assert datetime.fromisoformat(berlin["scheduledAt"]).hour in (7, 8)  # 09:00 CEST or CET in UTC


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"idempotencyKey": None}, "idempotencyKey"),
        ({"jobType": None}, "jobType"),
        ({"jobType": "send-fax"}, "known types: flaky, log-message, noop, slow"),
        ({"scheduledAt": None}, "scheduledAt is required"),
        ({"scheduledAt": "tomorrow"}, "RFC 3339"),
        ({"scheduledAt": "2026-09-29T18:00:00"}, "offset"),
        ({"scheduledAt": "2026-09-29"}, "RFC 3339"),
        ({"scheduledAt": 1790000000}, "RFC 3339"),
        ({"priority": "5"}, "priority"),
        ({"priority": 1.5}, "priority"),
        ({"priority": True}, "priority"),
        ({"maxAttempts": "3"}, "maxAttempts"),
        ({"payload": [1, 2]}, "payload"),
        ({"payload": "text"}, "payload"),
        ({"tenantId": ""}, "tenantId"),
        ({"unknownField": 1}, "unknownField"),
        ({"scheduledAt": None, "cron": "61 * * * *"}, "invalid cron"),
        ({"scheduledAt": None, "cron": "0 0 30 2 *"}, "never fires"),
        ({"scheduledAt": None, "interval": "soon"}, "invalid interval"),
        ({"scheduledAt": None, "cron": "0 2 * * *", "timezone": "Mars/Base"}, "unknown timezone"),
        ({"cron": "0 2 * * *"}, "not both"),
        ({"timezone": "Europe/Berlin"}, "timezone applies only to cron"),
        ({"timeoutSeconds": 0}, "timeoutSeconds"),
    ],
)
def test_invalid_input_is_400_with_a_clear_error(api: TestClient, overrides: dict[str, Any], fragment: str) -> None:
    response = api.post("/jobs", json=job_body(**overrides))
    assert response.status_code == 400, response.text
    assert fragment in response.json()["error"]
    assert api.get("/jobs", params={"tenantId": "tenant-a"}).json() == []  # nothing stored


def test_a_missing_tenant_id_is_400_without_auth_and_the_keys_tenant_with_it(api: TestClient, auth_mode: str) -> None:
    response = api.post("/jobs", json=job_body(tenantId=None))
    if auth_mode == "off":
        assert response.status_code == 400
        assert "tenantId" in response.json()["error"]
        assert api.get("/jobs", params={"tenantId": "tenant-a"}).json() == []
    else:
        assert response.status_code == 201
        assert response.json()["tenantId"] == "tenant-a"


@pytest.mark.parametrize(
    "raw", [b"{not json", b"", b"[1,2]", b"\xff\xfe", b'"text"', b'{"idempotencyKey": NaN}', b'{"a": Infinity}']
)
def test_malformed_json_is_400(api: TestClient, raw: bytes) -> None:
    response = api.post("/jobs", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert response.json()["error"]


def test_payload_over_256_kib_is_413_and_at_the_limit_is_accepted(api: TestClient) -> None:
    filler = "x" * (MAX_PAYLOAD_BYTES - len('{"message":""}'))
    assert api.post("/jobs", json=job_body(payload={"message": filler})).status_code == 201
    too_big = api.post("/jobs", json=job_body(idempotencyKey="big", payload={"message": filler + "x"}))
    assert too_big.status_code == 413
    assert "limit" in too_big.json()["error"]
    huge_body = api.post(
        "/jobs", content=b"{" + b" " * (3 * 1024 * 1024) + b"}", headers={"content-type": "application/json"}
    )
    assert huge_body.status_code == 413


def test_get_malformed_id_is_400_and_unknown_is_404(api: TestClient) -> None:
    assert api.get("/jobs/not-an-id").status_code == 400
    assert api.get("/jobs/zzzzzzzzzzzzzzzzzzzzzzzz").status_code == 400
    missing = api.get("/jobs/66f9a1c2e4b0a3d5c8f12a01")
    assert missing.status_code == 404
    assert missing.json() == {"error": "job 66f9a1c2e4b0a3d5c8f12a01 not found"}


def test_list_is_newest_first_filtered_and_limited(api: TestClient) -> None:
    ids = [api.post("/jobs", json=job_body(idempotencyKey=f"k{i}")).json()["id"] for i in range(5)]
    api.post("/jobs", json=job_body(idempotencyKey="other-tenant", tenantId="tenant-b"))
    listed = api.get("/jobs", params={"tenantId": "tenant-a"}).json()
    assert [j["id"] for j in listed] == ids[::-1]
    assert [j["id"] for j in api.get("/jobs", params={"tenantId": "tenant-a", "limit": "2"}).json()] == ids[:2:-1][:2]
    for bad in ("0", "-3", "abc", "1.5"):
        assert len(api.get("/jobs", params={"tenantId": "tenant-a", "limit": bad}).json()) == 5
    api.delete(f"/jobs/{ids[1]}")
    cancelled = api.get("/jobs", params={"tenantId": "tenant-a", "status": "cancelled"}).json()
    assert [j["id"] for j in cancelled] == [ids[1]]
    assert api.get("/jobs", params={"tenantId": "tenant-a", "status": "dlq"}).json() == []


def test_list_limit_caps_at_5000() -> None:
    from services.api.http.request_bodies import list_limit

    assert list_limit("5001") == 5000
    assert list_limit("99999999999") == 5000
    assert list_limit(None) == 100


def test_list_needs_tenant_and_a_known_status(api: TestClient, auth_mode: str) -> None:
    if auth_mode == "off":
        assert api.get("/jobs").status_code == 400
        assert api.get("/jobs").json() == {"error": "tenantId is required"}
    else:  # the key's tenant
        assert api.get("/jobs").status_code == 200
        assert api.get("/jobs", params={"tenantId": ""}).json() == {"error": "tenantId is required"}
    bad = api.get("/jobs", params={"tenantId": "tenant-a", "status": "failed"})
    assert bad.status_code == 400
    assert "unknown status" in bad.json()["error"]


def test_cancel_pending_then_again_is_409(api: TestClient) -> None:
    job = api.post("/jobs", json=job_body()).json()
    cancelled = api.delete(f"/jobs/{job['id']}")
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled"
    assert api.get(f"/jobs/{job['id']}").json()["status"] == "cancelled"
    again = api.delete(f"/jobs/{job['id']}")
    assert again.status_code == 409
    assert "cancelled" in again.json()["error"]
    assert api.delete("/jobs/66f9a1c2e4b0a3d5c8f12a01").status_code == 404
    assert api.delete("/jobs/xyz").status_code == 400


def test_cancel_queued_job_and_refuse_started_or_finished(api: TestClient, api_store: JobStore) -> None:
    job = api.post("/jobs", json=job_body(scheduledAt="2020-01-01T00:00:00Z")).json()
    [claimed] = api_store.claim_due_jobs(datetime.now(UTC), 10, {"log-message"})
    assert claimed.status is Status.QUEUED
    assert api.delete(f"/jobs/{job['id']}").json()["status"] == "cancelled"

    def started(key: str, max_attempts: int = 3) -> Job:
        api.post(
            "/jobs", json=job_body(idempotencyKey=key, scheduledAt="2020-01-01T00:00:00Z", maxAttempts=max_attempts)
        )
        [queued] = api_store.claim_due_jobs(datetime.now(UTC), 10, {"log-message"})
        lease = datetime.now(UTC) + timedelta(minutes=5)
        return start_one(api_store, AttemptStart(queued.id, queued.jobType, "w", lease))

    now = datetime.now(UTC)
    running = started("k-running")
    completed = started("k-completed")
    api_store.finish_attempt(completed, AttemptResult(Outcome.SUCCEEDED, startedAt=now, finishedAt=now))
    dead = started("k-dlq", max_attempts=1)
    api_store.finish_attempt(dead, AttemptResult(Outcome.FAILED, startedAt=now, finishedAt=now, error="boom"))
    for job_in, status in ((completed, "completed"), (dead, "dlq")):
        refused = api.delete(f"/jobs/{job_in.id}")
        assert refused.status_code == 409
        assert status in refused.json()["error"]
    accepted = api.delete(f"/jobs/{running.id}")  # its executor stops it: accepted, not yet done
    assert accepted.status_code == 202
    assert (accepted.json()["status"], accepted.json()["cancelRequested"]) == ("running", True)
    assert api.get(f"/jobs/{running.id}").json()["cancelRequested"] is True


def test_executions_and_retry_from_the_dlq(api: TestClient, api_store: JobStore) -> None:
    job = api.post("/jobs", json=job_body(scheduledAt="2020-01-01T00:00:00Z", maxAttempts=1)).json()
    assert api.get(f"/jobs/{job['id']}/executions").json() == []
    [queued] = api_store.claim_due_jobs(datetime.now(UTC), 10, {"log-message"})
    running = start_one(
        api_store, AttemptStart(queued.id, queued.jobType, "w7", datetime.now(UTC) + timedelta(minutes=5))
    )
    now = datetime.now(UTC)
    api_store.finish_attempt(running, AttemptResult(Outcome.FAILED, startedAt=now, finishedAt=now, error="boom"))
    [execution] = api.get(f"/jobs/{job['id']}/executions").json()
    assert {k: execution[k] for k in ("id", "attempt", "outcome", "worker", "error")} == {
        "id": f"{job['id']}:1",
        "attempt": 1,
        "outcome": "failed",
        "worker": "w7",
        "error": "boom",
    }
    assert {"startedAt", "finishedAt", "durationMs"} <= set(execution)
    assert api.get(f"/jobs/{job['id']}").json()["status"] == "dlq"

    retried = api.post(f"/jobs/{job['id']}/retry")
    assert retried.status_code == 200
    assert (retried.json()["status"], retried.json()["attempts"], retried.json()["attemptBase"]) == ("pending", 1, 1)
    again = api.post(f"/jobs/{job['id']}/retry")
    assert again.status_code == 409
    assert "pending" in again.json()["error"]
    assert api.post("/jobs/66f9a1c2e4b0a3d5c8f12a01/retry").status_code == 404
    assert api.get("/jobs/66f9a1c2e4b0a3d5c8f12a01/executions").status_code == 404
    assert api.get("/jobs/nope/executions").status_code == 400


def test_health_and_readiness(api: TestClient) -> None:
    health = api.get("/healthz")
    assert (health.status_code, health.text) == (200, "ok")
    wait_until(lambda: api.get("/readyz").status_code == 200, 10, "readiness")
    assert api.get("/readyz").text == "ok"


def test_mongo_down_gives_503_with_an_error_body_and_liveness_stays_up(
    make_app: MakeApp, api_headers: dict[str, str]
) -> None:
    dead = MongoJobStore.connect("mongodb://127.0.0.1:1/?directConnection=true", "x", timeout_ms=300)
    with TestClient(make_app(dead), raise_server_exceptions=False, headers=api_headers, base_url=LOCAL) as client:
        assert client.get("/healthz").status_code == 200
        for response in (
            client.get("/readyz"),
            client.post("/jobs", json=job_body()),
            client.get("/jobs/66f9a1c2e4b0a3d5c8f12a01"),
            client.get("/jobs", params={"tenantId": "t"}),
            client.delete("/jobs/66f9a1c2e4b0a3d5c8f12a01"),
        ):
            assert response.status_code == 503, response.text
            assert response.json()["error"]
    dead.close()


def test_the_openapi_document_is_made_at_its_first_request_not_at_start(tmp_path: Path) -> None:
    """Most processes never serve /openapi.json: building the app neither makes the document nor loads what makes
    it; the first request does, and the document is kept."""
    code = (
        "import sys\nfrom starlette.testclient import TestClient\n"
        "from services.api.app import create_app\nfrom shared.backends import open_backend\n"
        f"backend = open_backend('sqlite://{tmp_path}/api.db'); backend.jobs.ensure_schema()\n"
        "app = create_app(backend)\n"
        "assert 'services.api.openapi.document' not in sys.modules, 'made at start'\n"
        "with TestClient(app, base_url='http://localhost') as client:\n"
        "    first, again = client.get('/openapi.json'), client.get('/openapi.json')\n"
        "assert first.status_code == 200 and '/jobs' in first.json()['paths'], first.text\n"
        "assert again.json() == first.json()\n"
        "backend.close()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_openapi_describes_every_endpoint_from_the_models(api: TestClient, auth_mode: str) -> None:
    doc = api.get("/openapi.json").json()
    key_paths = {"/api-keys", "/api-keys/{prefix}"} if auth_mode == "required" else set()
    assert set(doc["paths"]) == {
        "/jobs",
        "/jobs/batch",
        "/jobs/{id}",
        "/jobs/{id}/executions",
        "/jobs/{id}/retry",
        "/jobs/{id}/delete",
        "/jobs/{id}/pause",
        "/jobs/{id}/resume",
        "/jobs/{id}/trigger",
        "/jobs/{id}/backfill",
        "/jobs/{id}/runs",
        "/jobs/{id}/upcoming",
        "/schedules/preview",
        "/schedules/apply",
        "/job-types",
        "/healthz",
        "/readyz",
        *key_paths,
        "/session",
        "/overview",
        "/history",
        "/dlq",
        "/dlq/redrive",
        "/signing-secrets",
        "/signing-secrets/{secret_id}",
        "/credentials",
        "/credentials/{name}",
        "/workflows",
        "/workflows/{id}",
        "/batches",
        "/batches/{id}",
        "/batches/{id}/jobs",
        "/batches/{id}/seal",
    }
    assert set(doc["paths"]["/jobs"]) == {"post", "get"}
    assert set(doc["paths"]["/jobs/{id}"]) == {"get", "delete", "patch"}
    request_schema = doc["components"]["schemas"]["JobRequest"]
    assert {"idempotencyKey", "tenantId", "jobType"} <= set(request_schema["required"])
    assert "cron" in request_schema["properties"]
    assert "status" in doc["components"]["schemas"]["Job"]["properties"]
    assert "jobsched API" in api.get("/docs").text
