"""The batch endpoints on both stores and in both authentication modes: a batch created with its callbacks,
members added in several requests (each answered on its own), sealed, its progress read; bad input a 400 with
nothing stored; a sealed batch takes no member; another tenant's batch is a 404."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from shared.store.base import JobStore, NewBatch
from tests.contract.store_kit import new

NOW = "2026-01-01T00:00:00Z"


def member(key: str, **fields: Any) -> dict[str, Any]:
    return {"idempotencyKey": key, "jobType": "noop", "scheduledAt": NOW, **fields}


def created(api: TestClient, **overrides: Any) -> dict[str, Any]:
    body = {
        "idempotencyKey": "run-1",
        "tenantId": "tenant-a",
        "name": "invoices",
        "onComplete": {"jobType": "log-message", "payload": {"message": "all done"}},
        "onSuccess": {"jobType": "noop", "priority": 3},
    } | overrides
    response = api.post("/batches", json=body)
    assert response.status_code == 201, response.text
    batch: dict[str, Any] = response.json()
    return batch


def test_a_batch_takes_members_in_several_requests_then_a_seal(api: TestClient) -> None:
    batch = created(api)
    assert (batch["status"], batch["sealed"], batch["total"]) == ("open", False, 0)
    on_complete = api.get(f"/jobs/{batch['callbacks']['onComplete']}").json()
    assert (on_complete["status"], on_complete["callbackOf"], on_complete["jobType"]) == (
        "waiting",
        batch["id"],
        "log-message",
    )
    assert api.get(f"/jobs/{batch['callbacks']['onSuccess']}").json()["priority"] == 3
    first = api.post(f"/batches/{batch['id']}/jobs", json={"jobs": [member("m-1"), member("m-2")]}).json()
    assert (first["created"], [r["status"] for r in first["results"]]) == (2, [201, 201])
    again = api.post(
        f"/batches/{batch['id']}/jobs", json={"jobs": [member("m-2"), member("m-3"), member("bad", jobType="nope")]}
    )
    assert [r["status"] for r in again.json()["results"]] == [409, 201, 400]
    assert api.get(f"/jobs/{first['results'][0]['id']}").json()["batchId"] == batch["id"]
    sealed = api.post(f"/batches/{batch['id'].upper()}/seal").json()
    assert (sealed["status"], sealed["total"], sealed["counts"]) == ("running", 3, {"pending": 3})
    refused = api.post(f"/batches/{batch['id']}/jobs", json={"jobs": [member("m-4")]})
    assert refused.status_code == 409
    assert refused.json() == {"error": f"batch {batch['id']} is sealed: no member can be added to it"}
    assert api.get(f"/batches/{batch['id']}").json() == sealed
    assert [b["id"] for b in api.get("/batches", params={"tenantId": "tenant-a"}).json()] == [batch["id"]]


def test_a_batch_made_sealed_with_its_members_in_one_request(api: TestClient) -> None:
    batch = created(api, jobs=[member("one"), member("two")], seal=True)
    assert (batch["status"], batch["total"], batch["created"]) == ("running", 2, 2)
    empty = created(api, idempotencyKey="empty", seal=True)  # nothing to wait for: fired at once
    assert empty["status"] == "succeeded"
    assert "firedAt" in empty
    assert api.get(f"/jobs/{empty['callbacks']['onComplete']}").json()["status"] == "pending"


def test_the_same_key_is_a_409_naming_the_batch(api: TestClient) -> None:
    batch = created(api)
    again = api.post("/batches", json={"idempotencyKey": "run-1", "tenantId": "tenant-a"})
    assert again.status_code == 409
    assert again.json() == {"error": "a batch with idempotencyKey 'run-1' already exists", "batchId": batch["id"]}


def test_bad_input_is_a_400_and_stores_nothing(api: TestClient) -> None:
    for body, error in (
        ({"idempotencyKey": "b", "tenantId": "tenant-a", "onComplete": {"jobType": "nope"}}, "onComplete: jobType"),
        (
            {"idempotencyKey": "b", "tenantId": "tenant-a", "onSuccess": {"jobType": "noop", "cron": "* * * * *"}},
            "onSuccess: cron",
        ),
        ({"idempotencyKey": "b", "tenantId": "tenant-a", "onSuccess": []}, "onSuccess"),
        ({"idempotencyKey": "b", "tenantId": "tenant-a", "seal": "yes"}, "seal"),
        ({"tenantId": "tenant-a"}, "idempotencyKey"),
    ):
        response = api.post("/batches", json=body)
        assert response.status_code == 400, response.text
        assert error in response.json()["error"]
    assert api.get("/batches", params={"tenantId": "tenant-a"}).json() == []
    assert api.get("/jobs", params={"tenantId": "tenant-a"}).json() == []
    batch = created(api)
    shapes: list[Any] = [{"jobs": []}, {"jobs": "x"}, {"members": []}, [], {"jobs": [member("k", dependsOnKeys=["x"])]}]
    for added in shapes:
        response = api.post(f"/batches/{batch['id']}/jobs", json=added)
        assert response.status_code in (200, 400), response.text
        if response.status_code == 200:
            assert response.json()["results"][0]["status"] == 400
    assert api.post("/batches/nope/seal").status_code == 400
    missing = "0123456789abcdef01234567"
    assert api.get(f"/batches/{missing}").json() == {"error": f"batch {missing} not found"}
    assert api.post(f"/batches/{missing}/jobs", json={"jobs": [member("x")]}).status_code == 404


def test_a_batchs_members_are_listed_by_status_in_pages(api: TestClient, api_store: JobStore) -> None:
    batch = created(api)
    added = api.post(f"/batches/{batch['id']}/jobs", json={"jobs": [member(f"m-{n}") for n in range(5)]}).json()
    ids = sorted(r["id"] for r in added["results"])
    api_store.cancel(ids[1])
    api_store.cancel(ids[3])
    pages, after = [], None
    while True:
        page = api.get(f"/batches/{batch['id']}/jobs", params={"limit": 2, **({"after": after} if after else {})})
        assert page.status_code == 200, page.text
        pages.append([(m["status"], m["jobId"]) for m in page.json()["jobs"]])
        if (after := page.json()["next"]) is None:
            break
    cancelled, pending = [("cancelled", ids[i]) for i in (1, 3)], [("pending", ids[i]) for i in (0, 2, 4)]
    assert pages == [cancelled, pending[:2], pending[2:]]
    one_status = api.get(f"/batches/{batch['id'].upper()}/jobs", params={"status": "cancelled", "limit": 1}).json()
    assert (one_status["jobs"], one_status["next"]) == (
        [{"jobId": ids[1], "status": "cancelled"}],
        f"cancelled.{ids[1]}",
    )
    rest = api.get(f"/batches/{batch['id']}/jobs", params={"status": "cancelled", "after": one_status["next"]})
    assert rest.json() == {"jobs": [{"jobId": ids[3], "status": "cancelled"}], "next": None}
    assert api.get(f"/batches/{batch['id']}/jobs", params={"status": "dlq"}).json() == {"jobs": [], "next": None}
    for params, error in (
        ({"status": "done"}, "status: 'done' is not a job status"),
        ({"after": "pending"}, "after: not a cursor of this listing"),
        ({"after": f"nope.{ids[0]}"}, "after: not a cursor of this listing"),
        ({"status": "pending", "after": f"cancelled.{ids[1]}"}, "after: a cursor of the cancelled members"),
    ):
        refused = api.get(f"/batches/{batch['id']}/jobs", params=params)
        assert refused.status_code == 400
        assert refused.json()["error"].startswith(error)
    missing = "0123456789abcdef01234567"
    assert api.get(f"/batches/{missing}/jobs").json() == {"error": f"batch {missing} not found"}


def test_another_tenants_batch_is_a_404(api: TestClient, api_store: JobStore, auth_mode: str) -> None:
    theirs = api_store.create_batch(NewBatch("tenant-b", "theirs", onComplete=new(tenantId="tenant-b"))).batch
    if auth_mode == "required":
        assert api.get(f"/batches/{theirs.id}").status_code == 404
        assert api.get(f"/batches/{theirs.id}/jobs").status_code == 404
        assert api.post(f"/batches/{theirs.id}/jobs", json={"jobs": [member("x")]}).status_code == 404
        assert api.post(f"/batches/{theirs.id}/seal").status_code == 404
        assert api.get("/batches", params={"tenantId": "tenant-b"}).status_code == 403
        assert api_store.batch(theirs.id).batch.sealed is False  # type: ignore[union-attr]
    else:
        assert api.get(f"/batches/{theirs.id}").json()["tenantId"] == "tenant-b"
