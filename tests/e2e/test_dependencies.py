"""Every service survives its dependencies going away and coming back: MongoDB (FerretDB), etcd and Kafka are
stopped and restarted under load; no process exits, no job is lost, and the API's /readyz says what is down."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import timedelta

import httpx2 as httpx
import pytest
from bson import ObjectId
from pymongo.database import Database

from shared.model import Status, utc_now
from shared.store.base import NewJob
from shared.store.mongo import MongoJobStore
from tests.conftest import LOCAL_SCRIPTS, Launch
from tests.support import free_port, wait_until

JOBS = 300
FAST = {
    "CLAIM_TIMEOUT": "5s",
    "QUEUED_TIMEOUT": "5s",
    "REAPER_INTERVAL": "1s",
    "LEASE_TTL": "3s",
    "MONGO_TIMEOUT": "2s",
}


def server(name: str, command: str) -> None:
    subprocess.run(["bash", str(LOCAL_SCRIPTS / f"{name}.sh"), command], check=True, capture_output=True)


@pytest.fixture
def local_servers(mongo_uri: str, etcd_endpoints: str, kafka_brokers: str) -> Iterator[None]:
    for name in ("ferretdb", "etcd", "kafka"):
        if subprocess.run(["bash", str(LOCAL_SCRIPTS / f"{name}.sh"), "status"], capture_output=True).returncode:
            pytest.fail(f"this test stops and restarts the local {name} of deployments/local/: start it first")
    yield
    for name in ("ferretdb", "etcd", "kafka"):
        server(name, "start")  # whatever happened, leave them running for the next test


@pytest.mark.exclusive  # it stops the shared FerretDB, etcd and Kafka
@pytest.mark.timeout(600)
def test_services_ride_out_dependency_outages(
    local_servers: None,
    launch: Launch,
    mongo_store: MongoJobStore,
    mongo_db: Database[dict[str, object]],
    request: pytest.FixtureRequest,
) -> None:
    api_port = free_port()
    api = launch("api", API_PORT=str(api_port), **FAST)
    processes = [api, launch("scheduler", **FAST), launch("scheduler", **FAST), launch("reaper", **FAST)]
    processes += [launch("executor", "--type", t, **FAST) for t in ("noop", "slow")]
    http = httpx.Client(base_url=f"http://127.0.0.1:{api_port}", timeout=10)
    request.addfinalizer(http.close)  # closed when the test fails too: a socket left open fails the next test
    wait_until(lambda: _status(http, "/readyz") == 200, 60, "the API to be ready")

    def create(n: int) -> None:
        job_type, payload = ("slow", {"sleepMs": 200}) if n % 4 == 0 else ("noop", {})
        mongo_store.create(
            NewJob(
                idempotencyKey=f"dep-{n}-{ObjectId()}",
                tenantId="t",
                jobType=job_type,
                payload=payload,
                scheduledAt=utc_now() + timedelta(milliseconds=n * 20),
            )
        )

    def finished() -> int:
        return mongo_db["jobs"].count_documents({"status": {"$in": [Status.COMPLETED.value, Status.DLQ.value]}})

    for n in range(JOBS // 3):
        create(n)
    wait_until(lambda: finished() >= JOBS // 6, 120, "work to be under way")

    server("ferretdb", "stop")
    wait_until(lambda: _status(http, "/readyz") == 503, 30, "/readyz to report the store down")
    assert _status(http, "/healthz") == 200  # liveness does not depend on the store
    server("ferretdb", "start")
    wait_until(lambda: _status(http, "/readyz") == 200, 60, "/readyz to recover")
    for n in range(JOBS // 3, 2 * JOBS // 3):
        create(n)

    server("etcd", "stop")  # the leader loses its lease; nobody may dispatch until etcd is back
    server("etcd", "start")
    server("kafka", "stop")
    server("kafka", "start")
    for n in range(2 * JOBS // 3, JOBS):
        create(n)

    wait_until(lambda: finished() == JOBS, 300, "every job to finish after the outages")
    exited = {p.name: p.process.returncode for p in processes if p.process.poll() is not None}
    assert exited == {}, "a service exited instead of waiting for its dependency"


def _status(http: httpx.Client, path: str) -> int:
    try:
        return http.get(path).status_code
    except httpx.HTTPError:
        return 0
