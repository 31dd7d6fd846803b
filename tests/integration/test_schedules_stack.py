"""Schedules in the distributed stack (API, schedulers on etcd, Kafka executors, FerretDB), through the API:
a leader killed while a buffer_all schedule has buffered runs loses none of them and doubles none; every
policy and endpoint against the real processes."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import httpx2 as httpx
import pytest

from shared.model import format_time, parse_time, utc_now
from shared.store.mongo import MongoJobStore
from tests.conftest import Launch
from tests.schedule_support import (
    assert_never_overlapped,
    assert_one_run_per_planned_time,
    attempt_spans,
    count,
    create_template,
    runs,
)
from tests.support import ServiceProcess, free_port, wait_until

RUNS = 6
TAKEOVER_BOUND_S = 60  # the election lease (10 s) runs out, then the standby leads
MINUTE = timedelta(minutes=1)


@pytest.fixture
def api(launch: Launch) -> Iterator[httpx.Client]:
    port = free_port()
    launch("api", API_PORT=str(port), API_HOST="127.0.0.1")
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)

    def ready() -> bool:
        try:
            return client.get("/readyz").status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(ready, 60, "the API to be ready")
    yield client
    client.close()


def leading(schedulers: list[ServiceProcess]) -> ServiceProcess | None:
    return next((s for s in schedulers if s.metric("scheduler_is_leader") == 1), None)


def test_leader_killed_with_buffered_runs_loses_none_and_doubles_none(launch: Launch, api: httpx.Client) -> None:
    first = launch("scheduler", name="a", NODE_ID="a", LEASE_TTL="10s")
    wait_until(lambda: first.metric("scheduler_is_leader") == 1, 30, "scheduler a to lead")
    second = launch("scheduler", name="b", NODE_ID="b", LEASE_TTL="10s")
    wait_until(lambda: second.metric("scheduler_is_leader") == 0, 30, "scheduler b to stand by")
    launch("executor", "--type", "slow", name="executor-slow")
    template = create_template(
        api,
        "buffered",
        jobType="slow",
        interval="1s",
        overlap="buffer_all",
        catchup="all",
        remainingRuns=RUNS,
        payload={"sleepMs": 1500},
    )
    waiting: dict[str, str] = {}  # the buffered runs as last read before the kill (read after it, the dying
    # leader may have promoted one in between)

    def two_buffered() -> bool:
        waiting.clear()
        waiting.update({r["id"]: r["plannedAt"] for r in runs(api, template["id"]) if r["status"] == "buffered"})
        return len(waiting) >= 2

    wait_until(two_buffered, 60, "two buffered runs")
    first.kill()
    assert len(waiting) >= 2
    wait_until(lambda: leading([second]), TAKEOVER_BOUND_S, "scheduler b to take over")
    wait_until(lambda: count(api, template["id"], "completed") == RUNS, 120, f"all {RUNS} runs to complete")

    found = runs(api, template["id"])
    assert len(found) == RUNS  # remainingRuns: no more, and none twice
    assert_one_run_per_planned_time(found)
    assert {r["id"]: r["plannedAt"] for r in found if r["id"] in waiting} == waiting  # the buffered ones ran
    spans = attempt_spans(api, template["id"])
    assert len(spans) == RUNS  # one attempt each: nothing started twice
    assert_never_overlapped(spans)  # buffer_all held across the two leaders
    assert api.get(f"/jobs/{template['id']}").json()["status"] == "completed"


def test_every_policy_and_endpoint_through_the_stack(
    launch: Launch, api: httpx.Client, mongo_store: MongoJobStore
) -> None:
    scheduler = launch("scheduler", name="s", NODE_ID="s")
    wait_until(lambda: scheduler.metric("scheduler_is_leader") == 1, 30, "the scheduler to lead")
    for job_type in ("slow", "noop"):
        launch("executor", "--type", job_type, name=f"executor-{job_type}")
    slow = {"jobType": "slow", "interval": "1s", "payload": {"sleepMs": 2200}}
    policies = {name: create_template(api, name, overlap=name, **slow) for name in ("skip", "buffer_one")}
    allow = create_template(api, "allow_all", overlap="allow_all", **slow)
    wait_until(lambda: count(api, allow["id"], "running") >= 2, 60, "allow_all runs to overlap")
    wait_until(lambda: all(count(api, t["id"], "completed") >= 2 for t in policies.values()), 90, "two runs each")
    for tpl in (*policies.values(), allow):
        assert api.post(f"/jobs/{tpl['id']}/pause", json={"note": "enough"}).json()["paused"] is True
    for tpl in policies.values():
        assert_never_overlapped(attempt_spans(api, tpl["id"]))
        assert_one_run_per_planned_time(runs(api, tpl["id"]))
    assert count(api, policies["buffer_one"]["id"], "buffered") <= 1
    assert (scheduler.metric('scheduler_schedule_actions_total{action="skipped"}') or 0) > 0

    # trigger (cancel_other), backfill, PATCH, upcoming, preview against the real processes
    manual = create_template(api, "manual", jobType="noop", cron="0 0 1 1 *", overlap="cancel_other")
    triggered = api.post(f"/jobs/{manual['id']}/trigger", json={"idempotencyKey": "once"})
    assert triggered.status_code == 201
    wait_until(lambda: api.get(f"/jobs/{triggered.json()['id']}").json()["status"] == "completed", 30, "the run")
    backfill = {"from": "2026-01-01T00:00:00Z", "to": "2027-01-01T00:00:00Z", "overlap": "allow_all"}
    assert api.post(f"/jobs/{manual['id']}/backfill", json=backfill).json() == {
        "spawned": 1,
        "existing": 0,
        "skipped": 0,
    }
    assert api.post(f"/jobs/{manual['id']}/backfill", json=backfill).json()["existing"] == 1
    wait_until(lambda: count(api, manual["id"], "completed") == 2, 30, "the backfilled run")
    patched = api.patch(f"/jobs/{manual['id']}", json={"cron": "0 12 * * *", "timezone": "Asia/Tokyo"}).json()
    assert api.get(f"/jobs/{manual['id']}/upcoming", params={"count": "1"}).json() == [patched["scheduledAt"]]
    preview = api.get("/schedules/preview", params={"cron": "0 12 * * *", "timezone": "Asia/Tokyo", "count": "1"})
    assert preview.json() == [patched["scheduledAt"]]

    # catch-up: the cursor of a 1-minute schedule ten minutes back is what an outage leaves
    caught = create_template(api, "catchup", jobType="noop", cron="* * * * *", catchup="all")
    cursor = utc_now().replace(second=0, microsecond=0) - 10 * MINUTE
    stored = mongo_store.get(caught["id"])
    assert stored is not None
    assert mongo_store.update_if_unmoved(stored, {"scheduledAt": cursor, "updatedAt": utc_now()}) is not None
    wait_until(lambda: "lastFiredAt" in api.get(f"/jobs/{caught['id']}").json(), 30, "the catch-up")
    last = parse_time(api.get(f"/jobs/{caught['id']}").json()["lastFiredAt"])
    expected = [format_time(cursor + i * MINUTE) for i in range(int((last - cursor) / MINUTE) + 1)]
    assert [r["plannedAt"] for r in runs(api, caught["id"])] == expected
    assert len(expected) >= 11
