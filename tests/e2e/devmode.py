"""`jobsched dev` (or `jobsched standalone`) as a real process, for the tests that need the whole product without
a server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2 as httpx

from shared.model import format_time, utc_now
from tests.support import REPO_ROOT, ServiceProcess, free_port, wait_until

JOBSCHED = str(REPO_ROOT / ".venv" / "bin" / "jobsched")

# Point every server variable at nothing: the embedded mode must not need any of them.
NO_SERVERS = {"MONGO_URI": "mongodb://127.0.0.1:1/", "KAFKA_BROKERS": "127.0.0.1:1", "ETCD_ENDPOINTS": "127.0.0.1:1"}


class Dev:
    """`jobsched dev` on `tmp_path/jobsched.db`; with `standalone`, `jobsched standalone --db` that file."""

    def __init__(self, tmp_path: Path, *, standalone: bool = False) -> None:
        self.db = tmp_path / "jobsched.db"
        self.standalone = standalone
        self.port = free_port()
        self.tmp_path = tmp_path
        self.runs: list[ServiceProcess] = []
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.http = httpx.Client(base_url=self.base_url, timeout=10)

    def start(self, *args: str, **settings: str) -> ServiceProcess:
        """Start `jobsched dev` (with `args`, and `settings` over the defaults) and wait until it is ready."""
        env = {**NO_SERVERS, "API_PORT": str(self.port), "SCHEDULER_TICK": "100ms", **settings}
        if self.standalone:
            service, args = "embedded", ("--db", str(self.db), *args)
        else:
            service, env = "dev", {"JOBSCHED_DB": str(self.db), **env}
        process = ServiceProcess(service, env, self.tmp_path, f"{service}-{len(self.runs)}", args=list(args))
        self.runs.append(process)
        wait_until(lambda: self._ready(process), 60, "jobsched dev to answer /readyz")
        return process

    def close(self) -> None:
        for process in self.runs:
            process.stop()
        self.http.close()

    def _ready(self, process: ServiceProcess) -> bool:
        assert process.process.poll() is None, process.log_text()[-3000:]
        try:
            return self.http.get("/readyz").status_code == 200
        except httpx.HTTPError:
            return False

    def new_api_key(self, tenant: str, role: str = "writer") -> str:
        """A key made as an operator makes it (`jobsched keys create`) in this instance's store file."""
        command = [JOBSCHED, "keys", "create", "--tenant", tenant, "--role", role, "--sqlite", str(self.db)]
        made = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
        return made.stdout.strip()

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


def start_failing(service: str, tmp_path: Path, args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """`service` run to its end on a file under `tmp_path` (expected to refuse to start): its status and output."""
    return subprocess.run(
        [sys.executable, "-m", f"services.{service}", *args],
        env={**os.environ, **NO_SERVERS, "JOBSCHED_DB": str(tmp_path / "x.db"), **env},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
