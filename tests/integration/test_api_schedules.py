"""The schedule endpoints through the API, on both stores (no scheduler runs here: what the API itself
writes and answers). The scheduler's side, through the API too, is in tests/e2e/test_dev_schedules.py
(jobsched dev) and tests/integration/test_schedules_stack.py (the distributed stack)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from starlette.testclient import TestClient

from shared.model import format_time, parse_time, run_key, utc_now


def template_body(key: str = "tpl", **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"idempotencyKey": key, "tenantId": "tenant-a", "jobType": "noop"}
    schedule = {} if "interval" in fields or "cron" in fields else {"cron": "*/5 * * * *"}
    return {**body, **schedule, **fields}


def create(api: TestClient, **fields: Any) -> dict[str, Any]:
    response = api.post("/jobs", json=template_body(**fields))
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()
    return job


def one_off(api: TestClient, key: str = "once") -> dict[str, Any]:
    body = {"idempotencyKey": key, "tenantId": "tenant-a", "jobType": "noop", "scheduledAt": "2030-01-01T00:00:00Z"}
    response = api.post("/jobs", json=body)
    assert response.status_code == 201
    job: dict[str, Any] = response.json()
    return job


# --- POST /jobs with policy fields --------------------------------------------------------------------------


def test_a_template_carries_its_policy_with_defaults(api: TestClient) -> None:
    plain = create(api)
    assert (plain["overlap"], plain["catchup"], plain["paused"]) == ("allow_all", "latest", False)
    full = create(
        api,
        key="full",
        overlap="buffer_all",
        catchup="all",
        catchupWindow="1h",
        startAt="2030-01-01T09:00:00Z",
        endAt="2030-02-01T00:00:00Z",
        remainingRuns=5,
        jitter="30s",
        pauseOnFailure=True,
    )
    assert {k: full[k] for k in ("overlap", "catchup", "catchupWindow", "remainingRuns", "jitter")} == {
        "overlap": "buffer_all",
        "catchup": "all",
        "catchupWindow": "1h",
        "remainingRuns": 5,
        "jitter": "30s",
    }
    assert (full["startAt"], full["endAt"], full["pauseOnFailure"]) == (
        "2030-01-01T09:00:00Z",
        "2030-02-01T00:00:00Z",
        True,
    )
    assert full["scheduledAt"] == "2030-01-01T09:00:00Z"  # the first fire time inside the bounds
    assert api.get(f"/jobs/{full['id']}").json() == full


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"overlap": "sometimes"}, "overlap"),
        ({"catchup": "some"}, "catchup"),
        ({"jitter": "soon"}, "jitter"),
        ({"catchupWindow": "0s"}, "catchupWindow"),
        ({"remainingRuns": -1}, "remainingRuns"),
        ({"remainingRuns": 0}, "no fire time"),
        ({"endAt": "2020-01-01T00:00:00Z"}, "no fire time"),
        ({"startAt": "2030-01-02T00:00:00Z", "endAt": "2030-01-01T00:00:00Z"}, "endAt must be after startAt"),
        ({"pauseOnFailure": "yes"}, "pauseOnFailure"),
    ],
)
def test_invalid_policy_fields_are_400(api: TestClient, fields: dict[str, Any], message: str) -> None:
    response = api.post("/jobs", json=template_body(**fields))
    assert response.status_code == 400
    assert message in response.json()["error"]


def test_policy_fields_on_a_one_off_job_are_400(api: TestClient) -> None:
    body = {"idempotencyKey": "k", "tenantId": "tenant-a", "jobType": "noop", "scheduledAt": "2030-01-01T00:00:00Z"}
    response = api.post("/jobs", json={**body, "overlap": "skip"})
    assert response.status_code == 400
    assert "apply only to recurring templates" in response.json()["error"]


# --- pause / resume -----------------------------------------------------------------------------------------


def test_pause_and_resume(api: TestClient) -> None:
    tpl = create(api, interval="1s")
    paused = api.post(f"/jobs/{tpl['id']}/pause", json={"note": "database maintenance"})
    assert paused.status_code == 200
    body = paused.json()
    assert (body["paused"], body["pauseNote"]) == (True, "database maintenance")
    assert parse_time(body["pausedAt"]) <= utc_now()
    assert api.get(f"/jobs/{tpl['id']}/upcoming").json() == []  # a paused template fires nothing
    before = utc_now()
    resumed = api.post(f"/jobs/{tpl['id']}/resume").json()
    assert resumed["paused"] is False
    assert "pauseNote" not in resumed
    assert "pausedAt" not in resumed
    assert parse_time(resumed["scheduledAt"]) > before  # the times that passed while paused never run
    assert api.post(f"/jobs/{tpl['id']}/pause").json()["paused"] is True  # no body: no note


def test_pause_errors(api: TestClient) -> None:
    job = one_off(api)
    assert api.post(f"/jobs/{job['id']}/pause", json={}).status_code == 409
    assert api.post("/jobs/0123456789abcdef01234567/pause", json={}).status_code == 404
    assert api.post("/jobs/nope/pause", json={}).status_code == 400
    tpl = create(api)
    assert api.post(f"/jobs/{tpl['id']}/pause", json={"note": 5}).status_code == 400
    malformed = {"content": b"{", "headers": {"content-type": "application/json"}}
    assert api.post(f"/jobs/{tpl['id']}/pause", **malformed).status_code == 400  # type: ignore[arg-type]
    assert api.post(f"/jobs/{tpl['id']}/pause", content=b"{}").status_code == 415  # a body must be declared JSON
    assert api.post(f"/jobs/{tpl['id']}/resume", json={"x": 1}).status_code == 400
    api.delete(f"/jobs/{tpl['id']}")
    response = api.post(f"/jobs/{tpl['id']}/pause", json={})
    assert response.status_code == 409
    assert "cancelled" in response.json()["error"]


# --- trigger ----------------------------------------------------------------------------------------------


def test_trigger_makes_one_run_now_and_a_retry_gets_the_same_run(api: TestClient) -> None:
    tpl = create(api, payload={"from": "template"})
    before = utc_now()
    response = api.post(f"/jobs/{tpl['id']}/trigger", json={"idempotencyKey": "deploy-42"})
    assert response.status_code == 201
    run = response.json()
    assert (run["templateId"], run["status"], run["payload"]) == (tpl["id"], "pending", {"from": "template"})
    assert run["idempotencyKey"] == "tpl-trigger-deploy-42"
    assert parse_time(run["scheduledAt"]) >= before - timedelta(milliseconds=1)
    retried = api.post(f"/jobs/{tpl['id']}/trigger", json={"idempotencyKey": "deploy-42"})
    assert (retried.status_code, retried.json()["id"]) == (200, run["id"])
    other = api.post(f"/jobs/{tpl['id']}/trigger", json={"payload": {"from": "request"}})
    assert (other.status_code, other.json()["payload"]) == (201, {"from": "request"})


def test_trigger_honours_the_overlap_policy_unless_overridden(api: TestClient) -> None:
    tpl = create(api, overlap="skip")
    first = api.post(f"/jobs/{tpl['id']}/trigger", json={"idempotencyKey": "a"}).json()
    refused = api.post(f"/jobs/{tpl['id']}/trigger", json={})
    assert refused.status_code == 409
    assert first["id"] in refused.json()["error"]
    retried = api.post(f"/jobs/{tpl['id']}/trigger", json={"idempotencyKey": "a"})  # a retry is not refused
    assert (retried.status_code, retried.json()["id"]) == (200, first["id"])
    buffered = api.post(f"/jobs/{tpl['id']}/trigger", json={"overlap": "buffer_one"})
    assert (buffered.status_code, buffered.json()["status"]) == (201, "buffered")
    assert api.post(f"/jobs/{tpl['id']}/trigger", json={"overlap": "allow_all"}).json()["status"] == "pending"
    listed = api.get("/jobs", params={"tenantId": "tenant-a", "status": "buffered"}).json()
    assert [j["id"] for j in listed] == [buffered.json()["id"]]


def test_trigger_with_cancel_other_cancels_the_waiting_run(api: TestClient) -> None:
    tpl = create(api, overlap="cancel_other")
    first = api.post(f"/jobs/{tpl['id']}/trigger").json()
    second = api.post(f"/jobs/{tpl['id']}/trigger").json()
    assert api.get(f"/jobs/{first['id']}").json()["status"] == "cancelled"
    assert second["status"] == "buffered"  # starts once the cancelled one has ended


def test_trigger_errors(api: TestClient) -> None:
    tpl = create(api)
    assert api.post(f"/jobs/{tpl['id']}/trigger", json={"overlap": "maybe"}).status_code == 400
    assert api.post(f"/jobs/{tpl['id']}/trigger", json={"payload": []}).status_code == 400
    huge_int = api.post(f"/jobs/{tpl['id']}/trigger", json={"payload": {"n": [2**63]}})
    assert huge_int.status_code == 400
    assert "64-bit" in huge_int.json()["error"]
    big = {"payload": {"x": "a" * (300 * 1024)}}
    assert api.post(f"/jobs/{tpl['id']}/trigger", json=big).status_code == 413
    assert api.post(f"/jobs/{one_off(api)['id']}/trigger").status_code == 409


# --- backfill ---------------------------------------------------------------------------------------------


def test_backfill_is_idempotent_across_repeated_and_overlapping_ranges(api: TestClient) -> None:
    tpl = create(api, key="bf")
    first = api.post(f"/jobs/{tpl['id']}/backfill", json={"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T00:15:00Z"})
    assert first.status_code == 200
    assert first.json() == {"spawned": 3, "existing": 0, "skipped": 0}
    again = api.post(f"/jobs/{tpl['id']}/backfill", json={"from": "2026-01-01T00:05:00Z", "to": "2026-01-01T00:25:00Z"})
    assert again.json() == {"spawned": 2, "existing": 2, "skipped": 0}
    runs = api.get(f"/jobs/{tpl['id']}/runs").json()
    planned = [r["plannedAt"] for r in runs]
    assert planned == [f"2026-01-01T00:{m:02d}:00Z" for m in (20, 15, 10, 5, 0)]  # newest planned first
    first_run = datetime(2026, 1, 1, tzinfo=UTC)
    assert runs[-1]["idempotencyKey"] == run_key("bf", first_run)
    assert [r["plannedAt"] for r in api.get(f"/jobs/{tpl['id']}/runs", params={"limit": "2"}).json()] == planned[:2]


def test_backfill_with_skip_runs_only_the_first_time(api: TestClient) -> None:
    tpl = create(api)
    body = {"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T01:00:00Z", "overlap": "skip"}
    assert api.post(f"/jobs/{tpl['id']}/backfill", json=body).json() == {"spawned": 1, "existing": 0, "skipped": 11}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"from": "2026-01-01T00:00:00Z", "to": "2026-03-01T00:00:00Z"}, "more than 10000"),
        ({"from": "2026-01-01T01:00:00Z", "to": "2026-01-01T00:00:00Z"}, "after"),
        ({"from": "2026-01-01T00:00:00Z"}, "to"),
        ({"from": "yesterday", "to": "2026-01-01T00:00:00Z"}, "from"),
    ],
)
def test_backfill_errors(api: TestClient, body: dict[str, Any], message: str) -> None:
    tpl = create(api)
    response = api.post(f"/jobs/{tpl['id']}/backfill", json=body)
    assert response.status_code == 400
    assert message in response.json()["error"]


# --- PATCH --------------------------------------------------------------------------------------------------


def test_patch_a_template_recomputes_the_next_fire_time(api: TestClient) -> None:
    tpl = create(api, key="p", payload={"v": 1})
    patched = api.patch(
        f"/jobs/{tpl['id']}",
        json={"cron": "0 3 * * *", "timezone": "Europe/Berlin", "payload": {"v": 2}, "overlap": "skip", "endAt": None},
    )
    assert patched.status_code == 200, patched.text
    body = patched.json()
    assert (body["cron"], body["timezone"], body["payload"], body["overlap"]) == (
        "0 3 * * *",
        "Europe/Berlin",
        {"v": 2},
        "skip",
    )
    assert parse_time(body["scheduledAt"]).astimezone().minute == 0
    as_interval = api.patch(f"/jobs/{tpl['id']}", json={"interval": "10m"}).json()
    assert "cron" not in as_interval
    assert "timezone" not in as_interval
    assert parse_time(as_interval["scheduledAt"]) - utc_now() <= timedelta(minutes=10)
    reset = api.patch(f"/jobs/{tpl['id']}", json={"maxAttempts": None, "timeoutSeconds": 30}).json()
    assert (reset["maxAttempts"], reset["timeoutSeconds"]) == (3, 30)
    run = api.post(f"/jobs/{tpl['id']}/trigger").json()
    api.patch(f"/jobs/{tpl['id']}", json={"payload": {"v": 3}})
    assert api.get(f"/jobs/{run['id']}").json()["payload"] == {"v": 2}  # a spawned run keeps its copy


@pytest.mark.parametrize(
    "body",
    [
        {"cron": "99 * * * *"},
        {"cron": "* * * * *", "interval": "1m"},
        {"jobType": "slow"},
        {"idempotencyKey": "other"},
        {"overlap": "never"},
        {"cron": None},
        {"timezone": "Mars/Olympus"},
        {"interval": "1m", "timezone": "UTC"},
        {"payload": None},
    ],
)
def test_patch_a_template_with_bad_fields_is_400(api: TestClient, body: dict[str, Any]) -> None:
    tpl = create(api)
    response = api.patch(f"/jobs/{tpl['id']}", json=body)
    assert response.status_code == 400, response.text
    assert api.get(f"/jobs/{tpl['id']}").json() == tpl


def test_patch_a_pending_one_off_job(api: TestClient) -> None:
    job = one_off(api)
    patched = api.patch(f"/jobs/{job['id']}", json={"scheduledAt": "2031-05-05T05:05:05Z", "priority": 9})
    assert patched.status_code == 200
    assert (patched.json()["scheduledAt"], patched.json()["priority"]) == ("2031-05-05T05:05:05Z", 9)
    assert api.patch(f"/jobs/{job['id']}", json={"cron": "* * * * *"}).status_code == 400
    assert api.patch(f"/jobs/{job['id']}", json={"maxAttempts": 5}).status_code == 400
    api.delete(f"/jobs/{job['id']}")
    assert api.patch(f"/jobs/{job['id']}", json={"priority": 1}).status_code == 409


# --- upcoming and preview -----------------------------------------------------------------------------------


def test_upcoming_lists_the_next_fire_times_within_the_runs_left(api: TestClient) -> None:
    tpl = create(api, cron="0 2 * * *", timezone="Europe/Berlin", remainingRuns=2)
    times = api.get(f"/jobs/{tpl['id']}/upcoming", params={"count": "5"}).json()
    assert len(times) == 2
    assert times[0] == tpl["scheduledAt"]
    assert parse_time(times[1]) - parse_time(times[0]) in (
        timedelta(hours=23),
        timedelta(hours=24),
        timedelta(hours=25),
    )
    assert api.get(f"/jobs/{tpl['id']}/upcoming", params={"count": "101"}).status_code == 400
    assert api.get(f"/jobs/{tpl['id']}/upcoming", params={"count": "x"}).status_code == 400
    assert api.get(f"/jobs/{one_off(api)['id']}/upcoming").status_code == 409


def test_preview_shows_the_daylight_saving_rules(api: TestClient) -> None:
    response = api.get("/schedules/preview", params={"cron": "30 2 * * *", "timezone": "Europe/Berlin", "count": "100"})
    assert response.status_code == 200
    times = [parse_time(t) for t in response.json()]
    assert len(times) == 100
    assert times == sorted(times)
    assert times[0] > utc_now()
    every = api.get("/schedules/preview", params={"interval": "90m", "count": "3"}).json()
    gaps = {parse_time(b) - parse_time(a) for a, b in itertools.pairwise(every)}
    assert gaps == {timedelta(minutes=90)}


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"cron": "* * * * *", "interval": "1m"},
        {"cron": "61 * * * *"},
        {"cron": "* * * * *", "timezone": "Nowhere/City"},
        {"interval": "0s"},
        {"cron": "* * * * *", "count": "0"},
    ],
)
def test_preview_errors_are_400(api: TestClient, params: dict[str, str]) -> None:
    response = api.get("/schedules/preview", params=params)
    assert response.status_code == 400
    assert response.json()["error"]


def test_runs_of_a_job_without_runs_is_an_empty_list(api: TestClient) -> None:
    assert api.get(f"/jobs/{create(api)['id']}/runs").json() == []
    assert api.get("/jobs/0123456789abcdef01234567/runs").status_code == 404


def test_lastfiredat_is_absent_until_the_template_fires(api: TestClient) -> None:
    tpl = create(api)
    assert "lastFiredAt" not in tpl
    assert format_time(parse_time(tpl["scheduledAt"])) == tpl["scheduledAt"]


def test_bounds_are_kept_to_the_millisecond_like_every_stored_time(api: TestClient) -> None:
    tpl = create(api, interval="1h", startAt="2030-01-01T09:00:00.123456Z", endAt="2030-01-02T00:00:00.5Z")
    assert (tpl["startAt"], tpl["endAt"]) == ("2030-01-01T09:00:00.123Z", "2030-01-02T00:00:00.500Z")
    assert api.get(f"/jobs/{tpl['id']}").json() == tpl
