"""A job due now starts without waiting for the scheduler's next tick: the API nudges the scheduler when it stores
one (in-process in `jobsched dev`, a UDP datagram between processes). The tick here is a minute long and the first
tick of the term has passed, so a job that completes within seconds was claimed because of the nudge."""

from __future__ import annotations

from functools import partial

import httpx2 as httpx

from shared.model import format_time, utc_now
from tests.conftest import Launch
from tests.e2e.devmode import Dev
from tests.support import free_port, wait_until

LONG_TICK = "60s"


def completed(http: httpx.Client, job_id: str) -> bool:
    return bool(http.get(f"/jobs/{job_id}").json()["status"] == "completed")


def job(key: str) -> dict[str, object]:
    return {"idempotencyKey": key, "tenantId": "due-now", "jobType": "noop", "scheduledAt": format_time(utc_now())}


def test_dev_starts_a_job_due_now_before_the_next_tick(dev: Dev) -> None:
    dev.start(SCHEDULER_TICK=LONG_TICK)
    for n in range(3):  # one after the other: each waits for its nudge, none for a tick
        job_id = dev.create(f"due-now-{n}")
        wait_until(partial(completed, dev.http, job_id), 20, f"job {n} to complete")


def test_the_api_nudges_the_elected_scheduler_over_udp(launch: Launch) -> None:
    nudge_port = free_port()
    api_port = free_port()
    scheduler = launch("scheduler", SCHEDULER_TICK=LONG_TICK, NUDGE_LISTEN=f"127.0.0.1:{nudge_port}")
    executor = launch("executor", "--type", "noop")
    launch("api", API_PORT=str(api_port), NUDGE_TARGETS=f"127.0.0.1:{nudge_port}")
    with httpx.Client(base_url=f"http://127.0.0.1:{api_port}", timeout=10) as http:

        def answers() -> bool:
            try:
                return http.get("/readyz").status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(answers, 60, "the API to be ready")
        wait_until(lambda: scheduler.metric("scheduler_is_leader") == 1, 60, "the scheduler to lead")
        wait_until(lambda: executor.metric("executor_in_flight") is not None, 60, "the executor to serve metrics")
        for n in range(3):
            created = http.post("/jobs", json=job(f"udp-{n}"))
            assert created.status_code == 201, created.text
            job_id = created.json()["id"]
            wait_until(partial(completed, http, job_id), 30, f"job {n} to complete")
