"""The distributed stack (`stack.sh up`, what `make up` runs) with AUTH=required: keys made with the
`jobsched keys` CLI, jobs run end to end with a writer key, roles and tenants refused, a revocation reaching
the API within seconds, and entry points that refuse an unauthenticated non-loopback bind.

The stack runs with its own state dir, ports, database, topic prefix and election key. Run it alone on the
machine: `flock /tmp/jobsched-heavy.lock .venv/bin/pytest tests/e2e/test_auth_stack.py`."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx2 as httpx
import pytest

from shared.keys import tokens
from shared.model import format_time, utc_now
from tests.e2e.stackkit import drop_database, logs_tail, script, stack_env
from tests.support import REPO_ROOT, free_port, wait_until

JOBSCHED = str(REPO_ROOT / ".venv" / "bin" / "jobsched")


@dataclass
class SecuredStack:
    api: str
    env: dict[str, str]

    def keys(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`jobsched keys ARGS` against the stack's database, as an operator runs it."""
        return subprocess.run(
            [JOBSCHED, "keys", *args], env=self.env, capture_output=True, text=True, timeout=60, check=False
        )

    def create_key(self, tenant: str, role: str) -> str:
        made = self.keys("create", "--tenant", tenant, "--role", role, "--name", f"e2e {role}")
        assert made.returncode == 0, made.stderr
        key = made.stdout.strip()
        assert made.stdout == key + "\n", "stdout holds the key and nothing else"
        assert tokens.prefix_of(key) is not None
        assert key not in made.stderr  # the audit line names the prefix only
        return key

    def client(self, key: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.api, headers=headers, timeout=10)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredStack]:
    run_id = uuid.uuid4().hex[:10]
    root = tmp_path_factory.mktemp("auth-stack")
    api_port = free_port()
    env = {**stack_env(root, run_id, api_port), "AUTH": "required", "AUTH_REFRESH": "500ms"}
    up = script("stack.sh", "up", env)
    exports = script("servers.sh", "env", env).stdout
    try:
        assert up.returncode == 0, f"stack.sh up failed:\n{up.stderr[-3000:]}\n{logs_tail(root / 'stack')}"
        assert "Authorization: Bearer" in up.stderr, "the stack's hints show how to send a key"
        mongo_uri = exports.rpartition("MONGO_URI=")[2].strip()
        yield SecuredStack(f"http://127.0.0.1:{api_port}", {**env, "MONGO_URI": mongo_uri})
    finally:
        drop_database(exports, env["MONGO_DB"])
        down = script("stack.sh", "down", env)
        assert down.returncode == 0, down.stderr


def job(n: int, job_type: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "idempotencyKey": f"auth-e2e-{n}",
        "jobType": job_type,
        "payload": payload,
        "scheduledAt": format_time(utc_now()),
    }


def test_jobs_run_end_to_end_with_a_writer_key_and_everything_else_is_refused(stack: SecuredStack) -> None:
    writer = stack.create_key("acme", "writer")
    reader = stack.create_key("acme", "reader")
    stranger = stack.create_key("globex", "writer")
    with stack.client(writer) as api, stack.client(reader) as read_only, stack.client(stranger) as other:
        wait_until(lambda: api.get("/jobs").status_code == 200, 30, "the API to know the new keys")
        ids = []
        for n in range(20):
            job_type, payload = ("noop", {}) if n % 2 else ("log-message", {"message": f"job {n}"})
            created = api.post("/jobs", json=job(n, job_type, payload))  # no tenantId: the key's
            assert created.status_code == 201, created.text
            assert created.json()["tenantId"] == "acme"
            ids.append(created.json()["id"])

        def statuses() -> list[str]:
            return [j["status"] for j in read_only.get("/jobs", params={"limit": "100"}).json()]

        wait_until(lambda: statuses() == ["completed"] * 20, 60, "20 jobs completed")
        assert read_only.get(f"/jobs/{ids[0]}/executions").json()[0]["outcome"] == "succeeded"
        assert read_only.post("/jobs", json=job(99, "noop", {})).status_code == 403
        assert other.get(f"/jobs/{ids[0]}").status_code == 404
        assert other.get("/jobs", params={"tenantId": "acme"}).status_code == 403
        assert other.get("/jobs").json() == []
        with stack.client() as anonymous:
            refused = anonymous.get("/jobs")
            assert refused.status_code == 401
            assert refused.headers["WWW-Authenticate"].startswith("Bearer")
            assert anonymous.get("/readyz").status_code == 200

        prefix = writer.split("_")[1]
        listed = stack.keys("list", "--tenant", "acme")
        assert listed.returncode == 0, listed.stderr
        assert prefix in listed.stdout
        assert writer not in listed.stdout
        revoked = stack.keys("revoke", prefix)
        assert revoked.returncode == 0, revoked.stderr
        wait_until(lambda: api.get("/jobs").status_code == 401, 15, "the revoked writer key to be refused")
        assert read_only.get("/jobs").status_code == 200


@pytest.mark.parametrize("service", ["api", "dev"])
def test_an_unauthenticated_non_loopback_bind_refuses_to_start(service: str, tmp_path: Any) -> None:
    env = {
        **os.environ,
        "API_HOST": "0.0.0.0",
        "API_PORT": str(free_port()),
        "METRICS_PORT": str(free_port()),
        "JOBSCHED_DB": str(tmp_path / "dev.db"),
        "MONGO_URI": "mongodb://127.0.0.1:1/",
    }
    env.pop("AUTH", None)
    done = subprocess.run(
        [sys.executable, "-m", f"services.{service}"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode != 0
    assert "AUTH=required" in done.stderr
    assert "AUTH=off" in done.stderr
