"""What `pip install` puts in an application's environment: the client alone (httpx, no server driver, no
top-level name but jobsched's), and with the `server` extra every binary, working beside an application that
has top-level packages named like the repository's folders (services, shared, seed)."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from functools import partial
from pathlib import Path

import httpx2 as httpx
import pytest
from pymongo.database import Database

from shared.model import format_time, utc_now
from tests.deployments.installs import Dist, new_venv, run, uv
from tests.e2e.devmode import Dev
from tests.support import ServiceProcess, free_port, wait_until

pytestmark = pytest.mark.e2e

SERVER_DRIVERS = ("pymongo", "confluent-kafka", "etcd3", "grpcio", "protobuf", "starlette", "uvicorn")
REPOSITORY_NAMES = ("services", "shared", "seed", "loadtest")


def site_packages(python: Path) -> Path:
    return Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())


def installed_names(python: Path) -> set[str]:
    listed = run(uv(), "pip", "list", "--python", python, "--format", "freeze")
    return {line.split("==")[0].lower() for line in listed.splitlines() if "==" in line}


@pytest.fixture(scope="module")
def client_only(tmp_path_factory: pytest.TempPathFactory, dist: Dist) -> Path:
    python = new_venv(tmp_path_factory.mktemp("client") / "venv")
    run(uv(), "pip", "install", "-q", "--python", python, dist.wheel)
    return python


ENQUEUES = """
    import sys
    from dataclasses import dataclass

    import jobsched

    jobs = jobsched.JobTypes()


    @dataclass
    class Message:
        message: str


    @jobs.handler("log-message")  # the application's declaration of a type the server runs
    def log_message(payload: Message, ctx: jobsched.HandlerContext) -> None: ...


    with jobsched.Client(sys.argv[1], tenant_id="installed") as client:
        job = client.enqueue(log_message, Message("hello from a client-only install"))
        print(client.wait(job.id, timeout=30).status)
"""


def test_the_client_installs_alone(client_only: Path) -> None:
    names = installed_names(client_only)
    assert {"jobsched", "httpx"} <= names
    assert [driver for driver in SERVER_DRIVERS if driver in names] == []
    top_level = {path.name for path in site_packages(client_only).iterdir()}
    assert [name for name in REPOSITORY_NAMES if name in top_level] == []
    # The server's command says what it needs instead of a traceback.
    refused = run(
        client_only, "-c", "import jobsched.cli, sys; sys.argv = ['jobsched', 'dev']; jobsched.cli.main()", check=False
    )
    assert "install jobsched with its server extra" in refused


def test_a_client_only_install_enqueues_typed_against_jobsched_dev(client_only: Path, tmp_path: Path) -> None:
    dev = Dev(tmp_path)
    try:
        dev.start()
        script = tmp_path / "enqueue.py"
        script.write_text(textwrap.dedent(ENQUEUES))
        assert run(client_only, script, dev.base_url, cwd=tmp_path).strip() == "completed"
        # The operator's commands talk to the API only: the client install has them.
        options = ["--url", dev.base_url, "--tenant", "installed", "--output", "json"]
        listed = json.loads(run(client_only.parent / "jobsched", "jobs", "list", *options))
        assert [(j["jobType"], j["status"]) for j in listed] == [("log-message", "completed")]
    finally:
        dev.close()


@pytest.fixture(scope="module")
def with_server(tmp_path_factory: pytest.TempPathFactory, dist: Dist) -> Path:
    python = new_venv(tmp_path_factory.mktemp("server") / "venv")
    run(uv(), "pip", "install", "-q", "--python", python, "-c", dist.requirements, f"{dist.wheel}[server]")
    return python


@pytest.fixture(scope="module")
def application(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An application whose own top-level packages are named like the repository's folders: importing any of
    them fails, so with it on the path every import of jobsched's must resolve elsewhere."""
    root = tmp_path_factory.mktemp("application")
    for name in REPOSITORY_NAMES:
        (root / name).mkdir()
        (root / name / "__init__.py").write_text(f"raise ImportError('this is the application\\'s own {name}')\n")
    return root


def test_with_the_server_extra_every_binary_runs_the_product(
    with_server: Path,
    application: Path,
    product_env: dict[str, str],
    mongo_db: Database[dict[str, object]],
    tmp_path: Path,
) -> None:
    jobsched = str(with_server.parent / "jobsched")
    assert [d for d in SERVER_DRIVERS if d not in installed_names(with_server)] == []
    api_port = free_port()
    env = {**product_env, "API_PORT": str(api_port), "PATH": os.environ["PATH"], "PYTHONPATH": str(application)}
    binaries = [
        ServiceProcess(name, env, tmp_path, f"installed-{name}", args=args, command=[jobsched, name])
        for name, args in (("api", []), ("scheduler", []), ("executor", ["--type", "noop"]), ("reaper", []))
    ]
    try:
        for binary in binaries:
            wait_until(partial(healthy, binary), 60, f"the installed {binary.name} to answer /healthz")
        with httpx.Client(base_url=f"http://127.0.0.1:{api_port}", timeout=10) as http:
            body = {
                "idempotencyKey": "installed-1",
                "tenantId": "t",
                "jobType": "noop",
                "scheduledAt": format_time(utc_now()),
            }
            created = http.post("/jobs", json=body)
            assert created.status_code == 201, created.text
            job = created.json()["id"]
            wait_until(lambda: http.get(f"/jobs/{job}").json()["status"] == "completed", 60, "the job to complete")
    finally:
        for binary in binaries:
            binary.stop()
    where = run(with_server, "-c", "import jobsched.server as s; print(s.Embedded.__module__)", cwd=application)
    assert where.strip() == "jobsched._server.services.embedded.node"


LEGACY = """
    from shared.handlers import registry

    @registry.register("greet-the-old-way")
    def greet(payload, ctx):
        return None
"""


def test_a_handler_module_of_the_first_releases_still_loads_from_the_wheel(with_server: Path, tmp_path: Path) -> None:
    (tmp_path / "old_handlers.py").write_text(textwrap.dedent(LEGACY))
    lister = "from jobsched._server.shared.handlers.plugins import main; main()"
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path), "JOBSCHED_HANDLERS": "old_handlers"}
    listed = subprocess.run(
        [with_server, "-c", lister], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    assert listed.returncode == 0, listed.stderr
    assert "greet-the-old-way" in listed.stdout.split()
    assert "deprecated shared.handlers registry" in listed.stderr  # what the operator's log says


def healthy(binary: ServiceProcess) -> bool:
    assert binary.process.poll() is None, binary.log_text()[-3000:]
    try:
        return httpx.get(f"http://127.0.0.1:{binary.metrics_port}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
