"""The schedule endpoints with AUTH=required (both stores): each role against each route, and another tenant's
template is a 404 on every one of them and stays untouched."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from bson import ObjectId

from shared.keys.base import KeyStore, Role
from shared.keys.manage import issue_key
from shared.model import Job, utc_now
from shared.store.base import JobStore, NewJob
from tests.integration.test_api_auth import Secured, expected
from tests.support import wait_until

BACKFILL = {"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T03:00:00Z"}
# (method, path, body, status when the role allows it); {tpl} is a pending template of tenant-a.
ROUTES: list[tuple[str, str, dict[str, Any] | None, int]] = [
    ("POST", "/jobs/{tpl}/pause", {"note": "n"}, 200),
    ("POST", "/jobs/{tpl}/resume", None, 200),
    ("POST", "/jobs/{tpl}/trigger", {}, 201),
    ("POST", "/jobs/{tpl}/backfill", BACKFILL, 200),
    ("PATCH", "/jobs/{tpl}", {"priority": 3}, 200),
    ("GET", "/jobs/{tpl}/runs", None, 200),
    ("GET", "/jobs/{tpl}/upcoming", None, 200),
    ("GET", "/schedules/preview?cron=0+*+*+*+*", None, 200),
]


@pytest.fixture
def secured(api_store: JobStore, api_keys: KeyStore) -> Secured:
    return Secured(api_store, api_keys, {"AUTH_REFRESH": "200ms"})


def hourly(store: JobStore, tenant: str = "tenant-a") -> Job:
    now = utc_now()
    return store.create(
        NewJob(
            idempotencyKey=f"hourly-{ObjectId()}",
            tenantId=tenant,
            jobType="noop",
            cron="0 * * * *",
            timezone="UTC",
            scheduledAt=now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1),
            createdAt=now,
            paused=False,
        )
    )


@pytest.mark.parametrize("role", [None, Role.READER, Role.WRITER], ids=lambda r: r or "no-key")
@pytest.mark.parametrize(
    ("method", "path", "body", "allowed"), ROUTES, ids=[f"{m} {p.split('?')[0]}" for m, p, _, _ in ROUTES]
)
def test_each_role_against_each_schedule_route(
    secured: Secured, role: Role | None, method: str, path: str, body: dict[str, Any] | None, allowed: int
) -> None:
    tpl = hourly(secured.store)
    with secured.client(secured.key("tenant-a", role) if role else None) as api:
        wait_until(lambda: api.get("/readyz").status_code == 200, 10, "readiness")
        response = api.request(method, path.format(tpl=tpl.id), json=body)
    assert response.status_code == expected(method, path.split("?")[0], allowed, role), response.text


def test_another_tenants_template_is_404_on_every_schedule_route_and_stays_untouched(secured: Secured) -> None:
    theirs = hourly(secured.store, "tenant-a")
    with secured.client(secured.key("tenant-b")) as other:
        for method, path, body, _ in ROUTES:
            if "{tpl}" not in path:
                continue
            response = other.request(method, path.format(tpl=theirs.id), json=body)
            assert response.status_code == 404, (method, path, response.text)
            assert response.json() == {"error": f"job {theirs.id} not found"}
    assert secured.store.get(theirs.id) == theirs
    assert secured.store.template_runs(theirs.id, None, 10) == []


def test_an_admin_may_drive_any_tenants_template(secured: Secured) -> None:
    theirs = hourly(secured.store, "tenant-a")
    admin = issue_key(secured.keys, "ops", Role.ADMIN, "ops", by="tests")[0]
    with secured.client(admin) as api:
        assert api.post(f"/jobs/{theirs.id}/trigger").status_code == 201
        assert api.post(f"/jobs/{theirs.id}/pause", json={}).json()["paused"] is True
    [run] = secured.store.template_runs(theirs.id, None, 10)
    assert run.tenantId == "tenant-a"
