"""An `http` job's payload is checked by one function (shared.job_requests.check_payload) on every path of the API
that writes a payload: POST /jobs, /jobs/batch, /schedules/apply, PATCH of a pending job or of a template (whose
runs copy its payload) and trigger. A payload that could never be sent is a 400 naming the field, and nothing is
stored: the executor would dead-letter it anyway, but a stored job must be one that can be sent. On both stores,
with AUTH off and required. (Backfill takes no payload: its runs copy the template's, checked when it was written.)

No request here is sent anywhere: no executor runs, and the URLs' names never resolve (`.invalid`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from starlette.testclient import TestClient

from jobsched.type_defaults import TypeDefaults
from shared.model import utc_now
from shared.store.base import JobStore
from tests.support import backend_beside

HOOK = {"url": "https://billing.example.invalid/hook", "json": {"invoice": 42}}
# Header names that CGI and WSGI receivers (and proxies that normalize) read as jobsched's own: `_` becomes `-`.
UNDERSCORED = ["Jobsched_Signature", "Idempotency_Key", "jobsched_job_id"]
# jobsched's own headers as written, refused at create already; PATCH and trigger stored them.
RESERVED = ["Jobsched-Signature", "Idempotency-Key", "Host", "Jobsched-Job-Id"]


def spoofing(name: str) -> dict[str, Any]:
    return {**HOOK, "headers": {name: "t=1,v1=forged"}}


@pytest.fixture
def http_served(api_store: JobStore) -> None:
    """An executor of the `http` type announced in the store (as one serving it would), so that the API takes
    http jobs: before the API starts, which reads the announcements once it has."""
    now = utc_now()
    live_until = now + timedelta(hours=1)
    backend_beside(api_store).job_types.announce("http-executor", {"http": TypeDefaults()}, now, live_until)


@pytest.fixture
def http_api(http_served: None, api: TestClient) -> TestClient:
    return api


def http_job(api: TestClient, key: str = "hook", **fields: Any) -> dict[str, Any]:
    body = {"idempotencyKey": key, "tenantId": "tenant-a", "jobType": "http", "payload": HOOK, **fields}
    if "cron" not in body:
        body["scheduledAt"] = "2030-01-01T00:00:00Z"
    made = api.post("/jobs", json=body)
    assert made.status_code == 201, made.text
    job: dict[str, Any] = made.json()
    return job


def stored_keys(api: TestClient) -> set[str]:
    return {j["idempotencyKey"] for j in api.get("/jobs", params={"tenantId": "tenant-a"}).json()}


def assert_refused(answer: Any, message: str) -> None:
    assert answer.status_code == 400, answer.text
    assert message in answer.json()["error"], answer.json()


# --- the paths that create -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", UNDERSCORED)
def test_create_refuses_a_reserved_header_written_with_underscores(http_api: TestClient, name: str) -> None:
    answer = http_api.post(
        "/jobs",
        json={
            "idempotencyKey": "spoof",
            "tenantId": "tenant-a",
            "jobType": "http",
            "payload": spoofing(name),
            "scheduledAt": "2030-01-01T00:00:00Z",
        },
    )
    assert_refused(answer, f"payload.headers: {name} is set by jobsched")
    assert stored_keys(http_api) == set()


@pytest.mark.parametrize("name", UNDERSCORED)
def test_a_batch_refuses_the_job_with_a_reserved_header_and_creates_the_other(http_api: TestClient, name: str) -> None:
    base = {"tenantId": "tenant-a", "jobType": "http", "scheduledAt": "2030-01-01T00:00:00Z"}
    answer = http_api.post(
        "/jobs/batch",
        json={
            "jobs": [
                {**base, "idempotencyKey": "good", "payload": HOOK},
                {**base, "idempotencyKey": "spoof", "payload": spoofing(name)},
            ]
        },
    )
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [r["status"] for r in results] == [201, 400]
    assert f"payload.headers: {name} is set by jobsched" in results[1]["error"]
    assert stored_keys(http_api) == {"good"}


@pytest.mark.parametrize("name", UNDERSCORED)
def test_a_schedules_file_with_a_reserved_header_is_refused_whole(http_api: TestClient, name: str) -> None:
    good = {"idempotencyKey": "nightly", "jobType": "http", "cron": "0 3 * * *", "payload": HOOK}
    spoof = {**good, "idempotencyKey": "spoof", "payload": spoofing(name)}
    answer = http_api.post("/schedules/apply", json={"tenantId": "tenant-a", "schedules": [good, spoof]})
    assert_refused(answer, f"schedules[1]: payload.headers: {name} is set by jobsched")
    assert stored_keys(http_api) == set()


# --- the paths that change a stored job or spawn a run ---------------------------------------------------------

# What a payload may not be on any path: a header jobsched sets, however it is written, or no request at all.
REFUSED = [
    *[
        pytest.param(spoofing(name), f"payload.headers: {name} is set by jobsched", id=name)
        for name in [*RESERVED, *UNDERSCORED[:1]]
    ],
    pytest.param({"no": "url"}, "unknown fields in an http job's payload: no", id="not-a-request"),
    pytest.param({"url": "ftp://billing.example.invalid/"}, "payload.url is http:// or https://", id="ftp"),
]


@pytest.mark.parametrize(("payload", "message"), REFUSED)
def test_patch_of_a_pending_job_refuses_a_payload_that_cannot_be_sent(
    http_api: TestClient, payload: dict[str, Any], message: str
) -> None:
    job = http_job(http_api)
    assert_refused(http_api.patch(f"/jobs/{job['id']}", json={"payload": payload, "priority": 7}), message)
    assert http_api.get(f"/jobs/{job['id']}").json() == job  # the old payload, and nothing else changed either
    changed = {**HOOK, "headers": {"X-Trace": "t-1"}}
    assert http_api.patch(f"/jobs/{job['id']}", json={"payload": changed}).json()["payload"] == changed


@pytest.mark.parametrize(("payload", "message"), REFUSED)
def test_patch_of_a_template_refuses_a_payload_its_runs_could_not_send(
    http_api: TestClient, payload: dict[str, Any], message: str
) -> None:
    template = http_job(http_api, "hourly", cron="0 * * * *")
    assert_refused(http_api.patch(f"/jobs/{template['id']}", json={"payload": payload, "cron": "5 * * * *"}), message)
    assert http_api.get(f"/jobs/{template['id']}").json() == template


@pytest.mark.parametrize(("payload", "message"), REFUSED)
def test_trigger_refuses_a_payload_that_cannot_be_sent(
    http_api: TestClient, payload: dict[str, Any], message: str
) -> None:
    template = http_job(http_api, "hourly", cron="0 * * * *")
    assert_refused(http_api.post(f"/jobs/{template['id']}/trigger", json={"payload": payload}), message)
    assert http_api.get(f"/jobs/{template['id']}/runs").json() == []
    assert stored_keys(http_api) == {"hourly"}
    run = http_api.post(f"/jobs/{template['id']}/trigger", json={"payload": {**HOOK, "method": "PUT"}})
    assert (run.status_code, run.json()["payload"]["method"]) == (201, "PUT")
