"""A single-node production install: `make dist` (the wheel and the lock's runtime requirements) installed into a
fresh virtual environment without any development tool, running `jobsched standalone` with the settings of the
systemd unit in deployments/systemd."""

from __future__ import annotations

import configparser
import os
import shlex
import signal
import subprocess
from pathlib import Path

import httpx2 as httpx
import pytest

from shared.model import format_time, utc_now
from tests.deployments.installs import Dist, new_venv, run, uv
from tests.deployments.manifests import REPO_ROOT, config_env_names
from tests.support import free_port, wait_until

pytestmark = pytest.mark.e2e

UNIT_FILE = REPO_ROOT / "deployments" / "systemd" / "jobsched.service"
DEV_ONLY = ("pytest", "mypy", "ruff", "playwright", "celery", "matplotlib", "apscheduler", "hypothesis")


def unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT_FILE.read_text())
    return parser


def unit_environment() -> dict[str, str]:
    return dict(item.split("=", 1) for item in shlex.split(unit()["Service"]["Environment"]))


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, dist: Dist) -> Path:
    """The virtual environment a production install makes; its bin directory."""
    root = tmp_path_factory.mktemp("install")
    python = new_venv(root / "venv")
    run(uv(), "pip", "install", "-q", "--python", python, "-r", dist.requirements, dist.wheel)
    return root / "venv" / "bin"


def test_the_install_has_no_development_tool(installed: Path) -> None:
    listed = run(uv(), "pip", "list", "--python", installed / "python").lower()
    assert "starlette" in listed  # the listing is the install's
    assert [name for name in DEV_ONLY if f"\n{name} " in listed] == []


def test_the_installed_service_runs_jobs_with_the_units_settings(installed: Path, tmp_path: Path) -> None:
    service = unit()["Service"]
    command = shlex.split(service["ExecStart"])
    assert command[:2] == ["/opt/jobsched/bin/jobsched", "standalone"]
    environment = unit_environment()
    assert set(environment) <= config_env_names()  # every setting the unit gives is one jobsched reads
    assert environment["API_HOST"] == "127.0.0.1"
    assert environment["AUTH"] == "required"

    db = tmp_path / "state" / "jobsched.db"
    db.parent.mkdir(mode=0o700)
    # An operator's first step (docs/operations.md): a key for the team's tenant, made in the service's file.
    key = run(installed / "jobsched", "keys", "create", "--tenant", "ops", "--role", "writer", "--sqlite", db).strip()
    api_port, metrics_port = free_port(), free_port()
    env = {
        "PATH": os.environ["PATH"],
        **environment,
        "API_PORT": str(api_port),
        "METRICS_PORT": str(metrics_port),
        "SCHEDULER_TICK": "100ms",
    }
    args = [str(installed / "jobsched"), *command[1:-1], str(db)]  # the unit's command, the test's paths
    assert command[-2] == "--db"
    log = (tmp_path / "standalone.log").open("wb")
    process = subprocess.Popen(args, env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{api_port}"
    http = httpx.Client(base_url=base_url, timeout=10, headers={"Authorization": f"Bearer {key}"})
    try:

        def ready() -> bool:
            assert process.poll() is None, (tmp_path / "standalone.log").read_text()[-3000:]
            try:
                return http.get("/readyz").status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, 60, "the installed jobsched standalone to answer /readyz")
        assert httpx.get(f"{base_url}/jobs").status_code == 401  # keys required, as shipped
        body = {"idempotencyKey": "first", "tenantId": "ops", "jobType": "noop", "scheduledAt": format_time(utc_now())}
        created = http.post("/jobs", json=body)
        assert created.status_code == 201, created.text
        job = created.json()["id"]
        wait_until(lambda: http.get(f"/jobs/{job}").json()["status"] == "completed", 30, "the job to complete")
        process.send_signal(getattr(signal, service["KillSignal"]))
        assert process.wait(float(service["TimeoutStopSec"])) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        log.close()
        http.close()
    assert oct(db.stat().st_mode & 0o777) == "0o600"
