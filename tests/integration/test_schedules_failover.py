"""Schedules in the distributed stack (API, two schedulers on etcd, a Kafka executor, FerretDB), through the
API: a leader killed while a buffer_all schedule has buffered runs loses none of them and doubles none."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2 as httpx
import pytest

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
    wait_until(lambda: count(api, template["id"], "buffered") >= 2, 60, "two buffered runs")
    first.kill()
    waiting = {r["id"]: r["plannedAt"] for r in runs(api, template["id"]) if r["status"] == "buffered"}
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
