"""POST /schedules/apply (a tenant's schedules as a file declares them) on both stores, with AUTH off and required:
created, unchanged when applied again, changed in place, dropped ones kept or paused or cancelled, a dry run that
writes nothing, a name held by a template made otherwise, and bodies refused whole with the place of the fault."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from shared.model import utc_now
from shared.store.base import JobStore, NewJob

WEEKLY = {"idempotencyKey": "weekly", "jobType": "noop", "cron": "0 9 * * MON", "timezone": "Europe/Berlin"}
HOURLY = {"idempotencyKey": "hourly", "jobType": "noop", "interval": "1h", "payload": {"n": 1}}
NIGHTLY = {"idempotencyKey": "nightly", "jobType": "noop", "cron": "0 3 * * *", "overlap": "skip"}


def apply(api: TestClient, schedules: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
    answer = api.post("/schedules/apply", json={"tenantId": "tenant-a", "schedules": schedules, **options})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def templates(api: TestClient) -> dict[str, dict[str, Any]]:
    listed = api.get("/jobs", params={"tenantId": "tenant-a", "kind": "template"}).json()
    return {t["idempotencyKey"]: t for t in listed}


def test_applying_a_file_creates_keeps_and_changes_schedules_in_place(api: TestClient) -> None:
    dry = apply(api, [WEEKLY, HOURLY, NIGHTLY], dryRun=True)
    assert (dry["added"], dry["dryRun"]) == (["weekly", "hourly", "nightly"], True)
    assert templates(api) == {}  # a dry run writes nothing

    assert apply(api, [WEEKLY, HOURLY, NIGHTLY])["added"] == ["weekly", "hourly", "nightly"]
    made = templates(api)
    assert {t["declaredBy"] for t in made.values()} == {"file"}
    again = apply(api, [NIGHTLY, WEEKLY, HOURLY])
    assert (again["added"], again["changed"], sorted(again["unchanged"])) == ([], [], ["hourly", "nightly", "weekly"])

    changed = apply(api, [{**WEEKLY, "cron": "0 10 * * MON"}, {**HOURLY, "payload": {"n": 2}}, NIGHTLY])
    assert sorted(changed["changed"]) == ["hourly", "weekly"]
    assert changed["changes"]["weekly"] == {"cron": ["0 9 * * MON", "0 10 * * MON"]}
    assert changed["changes"]["hourly"] == {"payload": [{"n": 1}, {"n": 2}]}
    now = templates(api)
    refused = api.patch(f"/jobs/{now['weekly']['id']}", json={"cron": "0 8 * * *"})
    assert refused.status_code == 409  # declared in a file: changed there
    assert "declared in a file" in refused.json()["error"]
    assert now["weekly"]["id"] == made["weekly"]["id"]
    assert (now["weekly"]["cron"], now["hourly"]["payload"]) == ("0 10 * * MON", {"n": 2})
    assert now["nightly"] == made["nightly"]


@pytest.mark.parametrize(
    ("removed", "status", "paused"),
    [("keep", "pending", False), ("pause", "pending", True), ("cancel", "cancelled", False)],
)
def test_a_schedule_the_file_dropped_is_kept_paused_or_cancelled(
    api: TestClient, removed: str, status: str, paused: bool
) -> None:
    apply(api, [WEEKLY, HOURLY])
    done = apply(api, [WEEKLY], removed=removed)
    assert (done["removed"], done["unchanged"]) == (["hourly"], ["weekly"])
    hourly = templates(api)["hourly"]
    assert (hourly["status"], hourly.get("paused", False)) == (status, paused)


def test_a_name_held_by_a_schedule_made_otherwise_is_left_alone(api: TestClient, api_store: JobStore) -> None:
    held = api_store.create(
        NewJob(idempotencyKey="weekly", tenantId="tenant-a", jobType="noop", scheduledAt=utc_now(), cron="0 8 * * *")
    )
    done = apply(api, [WEEKLY])
    assert done["conflicts"] == ["weekly"]
    assert templates(api)["weekly"]["id"] == held.id
    assert templates(api)["weekly"]["cron"] == "0 8 * * *"


ONE_OFF = {"idempotencyKey": "once", "jobType": "noop", "scheduledAt": "2030-01-01T00:00:00Z"}
FAULTS = [
    ([WEEKLY, {**HOURLY, "cron": "61 * * * *", "interval": None}], {}, "schedules[1]: "),
    ([WEEKLY, ONE_OFF], {}, "schedules[1]: not a schedule"),
    ([WEEKLY, WEEKLY], {}, "declared twice"),
    ([{**WEEKLY, "jobType": "no-such-type"}], {}, "unknown jobType"),
    ([WEEKLY], {"prune": True}, "prune"),
    ([{**WEEKLY, "remainingRuns": 3}], {}, "remainingRuns cannot be declared"),
    ([WEEKLY, {**HOURLY, "jobType": "no-such-type"}], {}, "schedules[1]: jobType"),
]


@pytest.mark.parametrize(("schedules", "extra", "message"), FAULTS)
def test_a_body_with_a_fault_is_refused_whole_with_its_place(
    api: TestClient, schedules: list[dict[str, Any]], extra: dict[str, Any], message: str
) -> None:
    answer = api.post("/schedules/apply", json={"tenantId": "tenant-a", "schedules": schedules, **extra})
    assert answer.status_code == 400, answer.text
    assert message in answer.json()["error"]
    assert templates(api) == {}
    assert api.post("/schedules/apply", json={"tenantId": "tenant-a"}).status_code == 400  # no schedules at all


def test_a_schedule_of_another_tenant_is_refused(api: TestClient, auth_mode: str) -> None:
    answer = api.post(
        "/schedules/apply", json={"tenantId": "tenant-a", "schedules": [{**WEEKLY, "tenantId": "tenant-b"}]}
    )
    assert answer.status_code == (403 if auth_mode == "required" else 400), answer.text
    assert templates(api) == {}
