"""`jobsched dev` as a real process: the whole product on SQLite with no server, and crash recovery."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from shared.model import format_time, utc_now
from tests.support import ServiceProcess, free_port, wait_until

# Point every server variable at nothing: the embedded mode must not need any of them.
NO_SERVERS = {"MONGO_URI": "mongodb://127.0.0.1:1/", "KAFKA_BROKERS": "127.0.0.1:1", "ETCD_ENDPOINTS": "127.0.0.1:1"}


class Dev:
    def __init__(self, tmp_path: Path) -> None:
        self.db = tmp_path / "jobsched.db"
        self.port = free_port()
        self.tmp_path = tmp_path
        self.runs: list[ServiceProcess] = []
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=10)

    def start(self) -> ServiceProcess:
        env = {**NO_SERVERS, "JOBSCHED_DB": str(self.db), "API_PORT": str(self.port), "SCHEDULER_TICK": "100ms"}
        process = ServiceProcess("dev", env, self.tmp_path, f"dev-{len(self.runs)}")
        self.runs.append(process)
        wait_until(lambda: self._ready(process), 60, "jobsched dev to answer /readyz")
        return process

    def _ready(self, process: ServiceProcess) -> bool:
        assert process.process.poll() is None, process.log_text()[-3000:]
        try:
            return self.http.get("/readyz").status_code == 200
        except httpx.HTTPError:
            return False

    def create(self, key: str, job_type: str = "noop", payload: dict[str, Any] | None = None) -> str:
        body = {
            "idempotencyKey": key,
            "tenantId": "dev",
            "jobType": job_type,
            "payload": payload or {},
            "scheduledAt": format_time(utc_now()),
        }
        response = self.http.post("/jobs", json=body)
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    def statuses(self) -> list[str]:
        return [j["status"] for j in self.http.get("/jobs", params={"tenantId": "dev", "limit": "5000"}).json()]


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[Dev]:
    made = Dev(tmp_path)
    yield made
    for process in made.runs:
        process.stop()
    made.http.close()


def test_a_job_completes_with_no_server_installed(dev: Dev) -> None:
    dev.start()
    job_id = dev.create("hello", "log-message", {"message": "hello from jobsched dev"})
    wait_until(lambda: dev.http.get(f"/jobs/{job_id}").json()["status"] == "completed", 30, "the job to complete")
    [execution] = dev.http.get(f"/jobs/{job_id}/executions").json()
    assert execution["outcome"] == "succeeded"


def test_kill_9_with_500_pending_jobs_loses_none(dev: Dev) -> None:
    first = dev.start()
    for n in range(500):
        dev.create(f"crash-{n}", "slow", {"sleepMs": 50})
    assert dev.statuses().count("completed") < 500  # killed while work is pending, queued and running
    first.kill()
    dev.start()
    wait_until(lambda: dev.statuses().count("completed") == 500, 180, "all 500 jobs to complete after the restart")


def test_ctrl_c_waits_for_the_handler_in_flight(dev: Dev) -> None:
    process = dev.start()
    job_id = dev.create("long", "slow", {"sleepMs": 1500})
    wait_until(lambda: dev.http.get(f"/jobs/{job_id}").json()["status"] == "running", 30, "the handler to start")
    assert process.terminate() == 0
    dev.start()
    assert dev.http.get(f"/jobs/{job_id}").json()["status"] == "completed"
    assert [e["outcome"] for e in dev.http.get(f"/jobs/{job_id}/executions").json()] == ["succeeded"]
