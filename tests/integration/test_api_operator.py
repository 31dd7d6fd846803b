"""The operator's endpoints (GET /overview, GET /dlq, POST /dlq/redrive) and GET /jobs's filters and cursors,
on both stores."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from bson import ObjectId
from starlette.testclient import TestClient

from shared.model import Job, Outcome, format_time, utc_now
from shared.store.base import AttemptResult, AttemptStart, JobStore, NewJob, RunSpec
from tests.support import start_one

NOW = format_time(utc_now())


def new(tenant: str = "tenant-a", job_type: str = "noop", **fields: Any) -> NewJob:
    values: dict[str, Any] = {"scheduledAt": utc_now() - timedelta(seconds=1), **fields}
    return NewJob(idempotencyKey=f"k-{ObjectId()}", tenantId=tenant, jobType=job_type, **values)


def dead(store: JobStore, error: str, tenant: str = "tenant-a", job_type: str = "flaky") -> Job:
    """A job whose only attempt failed with `error`: in the DLQ."""
    job = store.create(new(tenant, job_type, maxAttempts=1))
    assert job.id in {j.id for j in store.claim_due_jobs(utc_now(), 1000, {job_type})}
    started = start_one(store, AttemptStart(job.id, job_type, "w1", utc_now() + timedelta(minutes=5)))
    now = utc_now()
    finished = store.finish_attempt(started, AttemptResult(Outcome.FAILED, now, now, error))
    assert finished is not None
    return finished


def test_overview_counts_by_type_and_status_and_the_last_hour(
    api: TestClient, api_store: JobStore, auth_mode: str
) -> None:
    api_store.create(new(scheduledAt=utc_now() + timedelta(hours=1)))
    dead(api_store, "boom")
    dead(api_store, "boom", tenant="tenant-b")

    only_a = api.get("/overview", params={"tenantId": "tenant-a"}).json()
    assert only_a["tenantId"] == "tenant-a"
    assert only_a["byType"] == {"noop": {"pending": 1}, "flaky": {"dlq": 1}}
    assert only_a["totals"] == {"pending": 1, "dlq": 1}
    assert only_a["lastHour"]["flaky"] == {"completed": 0, "failed": 1, "dlq": 1}
    assert only_a["dlq"] == 1
    assert {"noop", "flaky", "log-message", "slow"} <= set(only_a["jobTypes"])

    unnamed = api.get("/overview").json()
    if auth_mode == "off":  # every tenant
        assert unnamed["byType"] == {"noop": {"pending": 1}, "flaky": {"dlq": 2}}
        assert unnamed["tenants"] == ["tenant-a", "tenant-b"]
        assert api.get("/overview", params={"tenantId": "tenant-b"}).json()["byType"] == {"flaky": {"dlq": 1}}
    else:  # the key's tenant, and nothing of another's
        assert unnamed["byType"] == only_a["byType"]
        assert unnamed["tenants"] == ["tenant-a"]
        assert api.get("/overview", params={"tenantId": "tenant-b"}).status_code == 403


def test_history_counts_per_minute_for_the_tenant_asked(api: TestClient, api_store: JobStore, auth_mode: str) -> None:
    dead(api_store, "boom")
    dead(api_store, "boom", tenant="tenant-b")
    day = api.get("/history", params={"tenantId": "tenant-a", "range": "24h"}).json()
    assert (day["tenantId"], day["range"], day["stepSeconds"]) == ("tenant-a", "24h", 60)
    assert all(len(day[k]) == 24 * 60 for k in ("completed", "failed", "dlq", "started", "latenessP99Ms", "waiting"))
    assert (sum(day["failed"]), sum(day["dlq"]), sum(day["started"]), sum(day["completed"])) == (1, 1, 1, 0)
    flaky_hour = api.get("/history", params={"tenantId": "tenant-a", "jobType": "flaky"}).json()
    assert (flaky_hour["range"], len(flaky_hour["dlq"]), sum(flaky_hour["dlq"])) == ("1h", 60, 1)
    assert sum(api.get("/history", params={"tenantId": "tenant-a", "jobType": "noop"}).json()["dlq"]) == 0
    every = api.get("/history")
    if auth_mode == "off":  # every tenant's sums
        assert sum(every.json()["dlq"]) == 2
    else:  # the key's tenant only
        assert sum(every.json()["dlq"]) == 1
        assert api.get("/history", params={"tenantId": "tenant-b"}).status_code == 403


@pytest.mark.parametrize("chosen", ["2h", "", "1H", "x" * 300])
def test_a_history_range_not_offered_is_a_400(api: TestClient, chosen: str) -> None:
    answer = api.get("/history", params={"range": chosen})
    assert answer.status_code == 400
    assert "is not one of 1h, 6h, 24h" in answer.json()["error"]


def test_dlq_groups_by_error_and_redrives_a_group(api: TestClient, api_store: JobStore, auth_mode: str) -> None:
    boom = [dead(api_store, "boom") for _ in range(3)]
    other = dead(api_store, "other")
    elsewhere = dead(api_store, "boom", tenant="tenant-b")

    groups = api.get("/dlq", params={"tenantId": "tenant-a"}).json()
    assert [(g["error"], g["count"], g["jobTypes"]) for g in groups] == [
        ("boom", 3, ["flaky"]),
        ("other", 1, ["flaky"]),
    ]
    assert {j["id"] for j in groups[0]["jobs"]} == {j.id for j in boom}

    # The key's tenant when the body names none (with AUTH=off: every tenant, so name it).
    group = {"lastError": "boom"} if auth_mode == "required" else {"lastError": "boom", "tenantId": "tenant-a"}
    answer = api.post("/dlq/redrive", json=group)
    assert answer.status_code == 200
    assert sorted(answer.json()["redriven"]) == sorted(j.id for j in boom)
    assert answer.json()["refused"] == []
    assert answer.json()["more"] is False
    assert all(api.get(f"/jobs/{j.id}").json()["status"] == "pending" for j in boom)
    assert api.get(f"/jobs/{other.id}").json()["status"] == "dlq"
    assert api_store.get(elsewhere.id) == elsewhere  # another tenant's group is its own
    if auth_mode == "required":
        assert api.get("/dlq", params={"tenantId": "tenant-b"}).status_code == 403
        refused = api.post("/dlq/redrive", json={"jobIds": [elsewhere.id]}).json()
        assert refused == {
            "redriven": [],
            "refused": [{"id": elsewhere.id, "error": f"job {elsewhere.id} not found"}],
            "more": False,
        }
        assert api.post("/dlq/redrive", json={"lastError": "boom", "tenantId": "tenant-b"}).status_code == 403


def test_redrive_named_jobs_reports_those_not_in_the_dlq(api: TestClient, api_store: JobStore) -> None:
    first = dead(api_store, "boom")
    pending = api_store.create(new())
    unknown = "0" * 24

    answer = api.post("/dlq/redrive", json={"jobIds": [first.id, pending.id, unknown]}).json()
    assert answer["redriven"] == [first.id]
    assert [r["id"] for r in answer["refused"]] == [pending.id, unknown]
    assert answer["refused"][0]["error"] == f"cannot retry job {pending.id}: it is pending"
    assert answer["refused"][1]["error"] == f"job {unknown} not found"


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (b"{", 400, "expected"),
        (b"[]", 400, "expected"),
        (b"{}", 400, "give jobIds or lastError"),
        (b'{"jobIds": ["x"], "lastError": "boom"}', 400, "give jobIds or lastError"),
        (b'{"jobIds": ["nothex"]}', 400, "malformed job ids"),
        (b'{"jobIds": []}', 400, "expected"),
        (b'{"lastError": "boom", "extra": 1}', 400, "expected"),
        (b'{"jobIds": ["' + b"a" * 70_000 + b'"]}', 413, "limit"),
    ],
)
def test_a_bad_redrive_request_is_a_4xx_with_its_reason(
    api: TestClient, body: bytes, status: int, message: str
) -> None:
    response = api.post("/dlq/redrive", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == status
    assert message in response.json()["error"]


def test_list_pages_by_cursor_and_filters_by_type_and_template(api: TestClient, api_store: JobStore) -> None:
    at = utc_now()
    made = [api_store.create(new(createdAt=at - timedelta(seconds=n // 2))) for n in range(5)]
    typed = api_store.create(new(job_type="slow"))
    newest_first = sorted([*made, typed], key=lambda j: (j.createdAt, j.id), reverse=True)

    first = api.get("/jobs", params={"tenantId": "tenant-a", "limit": "2"}).json()
    assert [j["id"] for j in first] == [j.id for j in newest_first[:2]]
    cursor = f"{first[-1]['createdAt']}_{first[-1]['id']}"
    second = api.get("/jobs", params={"tenantId": "tenant-a", "limit": "2", "before": cursor}).json()
    assert [j["id"] for j in second] == [j.id for j in newest_first[2:4]]
    back = f"{second[0]['createdAt']}_{second[0]['id']}"
    assert api.get("/jobs", params={"tenantId": "tenant-a", "limit": "2", "after": back}).json() == first

    assert [j["id"] for j in api.get("/jobs", params={"tenantId": "tenant-a", "jobType": "slow"}).json()] == [typed.id]
    template = api_store.create(new(cron="0 2 * * *"))
    assert api_store.add_run(template, RunSpec(utc_now()))[1]
    runs = api.get("/jobs", params={"tenantId": "tenant-a", "templateId": template.id}).json()
    assert [(r["templateId"], r["status"]) for r in runs] == [(template.id, "pending")]
    templates = api.get("/jobs", params={"tenantId": "tenant-a", "kind": "template"}).json()
    assert [j["id"] for j in templates] == [template.id]
    one_offs = api.get("/jobs", params={"tenantId": "tenant-a", "kind": "run", "limit": "100"}).json()
    assert template.id not in {j["id"] for j in one_offs}
    assert len(one_offs) == 7


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"before": "yesterday"}, "malformed cursor"),
        ({"after": f"{NOW}_xyz"}, "malformed cursor"),
        (
            {"before": f"{format_time(utc_now())}_{'a' * 24}", "after": f"{format_time(utc_now())}_{'a' * 24}"},
            "not both",
        ),
    ],
)
def test_a_bad_cursor_or_kind_is_a_400(api: TestClient, params: dict[str, str], message: str) -> None:
    response = api.get("/jobs", params={"tenantId": "tenant-a", **params})
    assert response.status_code == 400
    assert message in response.json()["error"]


def test_session_says_who_the_caller_is(api: TestClient, auth_mode: str) -> None:
    if auth_mode == "off":
        assert api.get("/session").json() == {"auth": "off", "role": "admin", "tenantId": None}
    else:
        assert api.get("/session").json() == {"auth": "required", "role": "writer", "tenantId": "tenant-a"}


def test_the_console_is_served_at_ui_without_a_key(api: TestClient) -> None:
    page = api.get("/ui/", headers={"Authorization": ""})
    assert page.status_code == 200
    assert '<script type="module" src="js/main.js">' in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    script = api.get("/ui/js/main.js")
    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]
    assert api.get("/ui/js/nothing.js").status_code == 404
    assert api.get("/ui", follow_redirects=False).headers["location"] == "ui/"  # relative: /ui/ wherever it is


def test_the_console_redirect_never_names_the_requests_host(api: TestClient, auth_mode: str) -> None:
    """A Host header of the client's choosing in the Location would be kept by a shared cache in front and
    sent to everyone as a redirect to that host."""
    host = "localhost" if auth_mode == "off" else "cache-poison.example"  # AUTH=off serves loopback names only
    redirect = api.get("/ui", headers={"Host": host}, follow_redirects=False)
    assert redirect.status_code == 307
    assert redirect.headers["location"] == "ui/"
    assert api.get("/ui", follow_redirects=True).url.path == "/ui/"


@pytest.mark.parametrize("path", ["/ui", "/ui/", "/ui/js/main.js"])
def test_the_consoles_files_name_the_methods_they_take(api: TestClient, path: str) -> None:
    refused = api.request("OPTIONS", path)
    assert refused.status_code == 405
    assert refused.headers["allow"] == "GET, HEAD"
    assert refused.json() == {"error": "method OPTIONS not allowed"}


@pytest.mark.parametrize("path", ["/jobs/", "/docs/", "/healthz/", "/overview/", "/openapi.json/"])
def test_a_trailing_slash_is_not_redirected_to_the_host_a_client_named(api: TestClient, path: str) -> None:
    """The router's slash redirect is an absolute URL made from the Host header: a shared cache in front would
    keep it and send everyone to that host."""
    answer = api.get(path, headers={"Host": "localhost"}, follow_redirects=False)
    assert answer.status_code == 404
    assert "location" not in answer.headers
