"""A credential's value goes to the receiver and nowhere else, in both deployments as real processes: `jobsched
dev` on its SQLite file, and the distributed API, scheduler and http executor on MongoDB (FerretDB). An http job
names the credential, the receiver on loopback gets it filled in; then every answer the API gave, every line the
processes logged and every byte the store keeps (the SQLite file with its WAL; every document of every collection
of the database) are searched for the value, as it is and in base64 or hex: it is in none of them. A credential
deleted since its job was made fails the job's attempt, naming it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from pymongo.database import Database

from shared.model import format_time, utc_now
from shared.sealing import new_key_text
from tests.conftest import Launch
from tests.e2e.devmode import Dev
from tests.e2e.test_http_jobs import Receiver, Reply
from tests.e2e.test_http_limits import _ready
from tests.secret_traces import assert_absent, mongo_bytes, sqlite_bytes
from tests.support import ServiceProcess, free_port, wait_until

pytestmark = pytest.mark.e2e
TOKEN = "sk_live_secrecy_9b2e4c71d05a46f3b8e0c2d7a1f65e48"
TENANT = "acme"


@dataclass
class Deployment:
    """The product as processes, its API, and what can be searched afterwards."""

    base_url: str
    processes: list[ServiceProcess]
    stored: Any  # () -> bytes: every byte the store keeps now
    answers: list[str] = field(default_factory=list)

    def call(self, http: httpx.Client, method: str, path: str, **options: Any) -> httpx.Response:
        """A request whose whole answer (status line, headers, body) is kept for the search."""
        response = http.request(method, path, **options)
        self.answers.append(f"{response.status_code} {dict(response.headers)} {response.text}")
        return response

    def logs(self) -> str:
        return "\n".join(p.log_text() for p in self.processes)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.server.shutdown()
    made.server.server_close()


@pytest.fixture(params=["sqlite", pytest.param("mongo", marks=pytest.mark.servers)])
def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Deployment]:
    if request.param == "sqlite":
        dev = Dev(tmp_path)
        process = dev.start(HTTP_JOBS_ALLOW="127.0.0.1")  # its key: made beside its file
        yield Deployment(dev.base_url, [process], lambda: sqlite_bytes(dev.db))
        dev.close()
        return
    launch: Launch = request.getfixturevalue("launch")
    db: Database[Any] = request.getfixturevalue("mongo_db")
    key = {"JOBSCHED_SECRETS_KEY": new_key_text()}
    port = free_port()
    api = launch("api", API_PORT=str(port), JOB_TYPES="http", **key)
    scheduler = launch("scheduler")
    executor = launch("executor", "--type", "http", HTTP_JOBS_ALLOW="127.0.0.1", **key)
    base_url = f"http://127.0.0.1:{port}"
    with httpx.Client(base_url=base_url, timeout=5) as http:
        wait_until(lambda: _ready(http, api), 60, "the API to be ready")
    yield Deployment(base_url, [api, scheduler, executor], lambda: mongo_bytes(db))


def test_the_value_reaches_the_receiver_and_nothing_else(deployment: Deployment, receiver: Receiver) -> None:
    receiver.script["/charge"] = [Reply(200, b"charged")]
    tenant = {"tenantId": TENANT}
    with httpx.Client(base_url=deployment.base_url, timeout=10) as http:
        made = deployment.call(http, "PUT", "/credentials/billing-token", params=tenant, json={"value": TOKEN})
        assert made.status_code == 201, made.text
        job_id = create(deployment, http, "paid", receiver.url("/charge"))
        done = wait_for(deployment, http, job_id, "completed")
        assert done["status"] == "completed", done
        [seen] = receiver.requests_to("/charge")
        assert seen.headers["Authorization"] == f"Bearer {TOKEN}"
        assert done["payload"]["headers"]["Authorization"] == {"credential": "billing-token", "prefix": "Bearer "}
        for path in ("/jobs", f"/jobs/{job_id}", f"/jobs/{job_id}/executions", "/credentials", "/signing-secrets"):
            assert deployment.call(http, "GET", path, params=tenant if "/jobs/" not in path else None).is_success
        deployment.call(http, "GET", "/overview", params=tenant)

        orphan = create(deployment, http, "orphan", receiver.url("/charge"), when="2099-01-01T00:00:00Z")
        gone = deployment.call(http, "DELETE", "/credentials/billing-token", params=tenant)
        assert gone.status_code == 200
        due = deployment.call(http, "PATCH", f"/jobs/{orphan}", json={"scheduledAt": format_time(utc_now())})
        assert due.status_code == 200, due.text
        failed = wait_for(deployment, http, orphan, "dlq")
        assert failed["attempts"] == 1
        assert "payload.headers.Authorization: no credential named 'billing-token'" in failed["lastError"]
        [attempt] = deployment.call(http, "GET", f"/jobs/{orphan}/executions").json()
        assert attempt["outcome"] == "failed"
        assert "no credential named 'billing-token'" in attempt["error"]
        assert len(receiver.requests_to("/charge")) == 1  # the orphan sent nothing

    logs = deployment.logs()
    assert job_id in logs  # the logs were read: the search is in the right place
    assert "billing-token" in logs
    assert_absent(TOKEN, logs, "the processes' logs")
    for answer in deployment.answers:
        assert_absent(TOKEN, answer, "an answer of the API")
    assert_absent(TOKEN, deployment.stored(), "the store")


def create(deployment: Deployment, http: httpx.Client, key: str, url: str, when: str | None = None) -> str:
    body = {
        "idempotencyKey": key,
        "tenantId": TENANT,
        "jobType": "http",
        "scheduledAt": when or format_time(utc_now()),
        "maxAttempts": 3,
        "payload": {"url": url, "headers": {"Authorization": {"credential": "billing-token", "prefix": "Bearer "}}},
    }
    made = deployment.call(http, "POST", "/jobs", json=body)
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def wait_for(deployment: Deployment, http: httpx.Client, job_id: str, status: str) -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        job: dict[str, Any] = deployment.call(http, "GET", f"/jobs/{job_id}").json()
        return job if job["status"] in ("completed", "dlq", "cancelled") else None

    job = wait_until(ended, 60, f"job {job_id} to end")
    assert job["status"] == status, json.dumps(job)[:2000]
    return job
