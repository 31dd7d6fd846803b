"""`jobsched keys` as an operator runs it, on the embedded store's file, and `jobsched dev` with AUTH=required
serving a key made that way."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx2 as httpx

from shared.keys import tokens
from shared.model import format_time, utc_now
from tests.e2e.devmode import NO_SERVERS
from tests.support import REPO_ROOT, ServiceProcess, free_port, wait_until

JOBSCHED = str(REPO_ROOT / ".venv" / "bin" / "jobsched")


def keys(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([JOBSCHED, "keys", *args], capture_output=True, text=True, timeout=60, check=False)


def test_create_list_revoke_and_generate_on_a_sqlite_file(tmp_path: Path) -> None:
    db = str(tmp_path / "jobsched.db")
    made = keys("create", "--tenant", "acme", "--role", "writer", "--name", "billing", "--sqlite", db)
    assert made.returncode == 0, made.stderr
    key = made.stdout.removesuffix("\n")
    assert made.stdout == key + "\n"
    prefix = tokens.prefix_of(key)
    assert prefix is not None
    assert f'"keyPrefix": "{prefix}"' in made.stderr
    assert '"action": "key_created"' in made.stderr
    assert key not in made.stderr

    listed = keys("--sqlite", db, "list")  # the option before the command works too
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split() == ["prefix", "tenantId", "role", "name", "createdAt", "lastUsedAt", "revokedAt"]
    assert row.split()[:4] == [prefix, "acme", "writer", "billing"]
    assert row.split()[-2:] == ["-", "-"]

    revoked = keys("revoke", prefix, "--sqlite", db)
    assert revoked.returncode == 0, revoked.stderr
    assert '"action": "key_revoked"' in revoked.stderr
    assert keys("list", "--sqlite", db).stdout.splitlines()[1].split()[-1] != "-"
    unknown = keys("revoke", "ffffffffffff", "--sqlite", db)
    assert unknown.returncode != 0
    assert "no API key" in unknown.stderr

    generated = {keys("generate").stdout.strip() for _ in range(2)}
    assert len(generated) == 2
    assert all(tokens.prefix_of(k) for k in generated)
    bad_role = keys("create", "--tenant", "acme", "--role", "root", "--sqlite", db)
    assert bad_role.returncode == 2
    assert "invalid choice" in bad_role.stderr


def test_jobsched_dev_with_auth_required_runs_jobs_for_a_cli_key(tmp_path: Path) -> None:
    db = tmp_path / "jobsched.db"
    key = keys("create", "--tenant", "acme", "--role", "writer", "--sqlite", str(db)).stdout.strip()
    port = free_port()
    env = {**NO_SERVERS, "JOBSCHED_DB": str(db), "API_PORT": str(port), "SCHEDULER_TICK": "100ms", "AUTH": "required"}
    dev = ServiceProcess("dev", env, tmp_path, "dev-auth")
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as anonymous:

            def ready() -> bool:
                assert dev.process.poll() is None, dev.log_text()[-3000:]
                try:
                    return anonymous.get("/readyz").status_code == 200
                except httpx.HTTPError:
                    return False

            wait_until(ready, 60, "jobsched dev to answer /readyz")
            assert anonymous.get("/jobs").status_code == 401
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}, timeout=10
        ) as api:
            body = {"idempotencyKey": "dev-1", "jobType": "noop", "scheduledAt": format_time(utc_now())}
            created = api.post("/jobs", json=body)
            assert created.status_code == 201, created.text
            assert created.json()["tenantId"] == "acme"
            wait_until(lambda: api.get(f"/jobs/{created.json()['id']}").json()["status"] == "completed", 30, "done")
    finally:
        dev.stop()
