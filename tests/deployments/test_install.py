"""What `pip install` puts in an application's environment: the client alone (httpx, no server driver, no
top-level name but jobsched's), and with the `server` extra every binary, working beside an application that
has top-level packages named like the repository's folders (services, shared, seed)."""

from __future__ import annotations

import os
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
    assert 'pip install "jobsched[server]"' in refused


def test_a_client_only_install_enqueues_typed_against_jobsched_dev(client_only: Path, tmp_path: Path) -> None:
    dev = Dev(tmp_path)
    try:
        dev.start()
        script = tmp_path / "enqueue.py"
        script.write_text(textwrap.dedent(ENQUEUES))
        assert run(client_only, script, dev.base_url, cwd=tmp_path).strip() == "completed"
    finally:
        dev.close()


@pytest.fixture(scope="module")
def with_server(tmp_path_factory: pytest.TempPathFactory, dist: Dist) -> Path:
    """The server extra, installed beside an application whose own top-level packages are named like the
    repository's folders: importing any of them fails, so every import of jobsched's must resolve elsewhere."""
    python = new_venv(tmp_path_factory.mktemp("server") / "venv")
    run(uv(), "pip", "install", "-q", "--python", python, "-c", dist.requirements, f"{dist.wheel}[server]")
    for name in REPOSITORY_NAMES:
        package = site_packages(python) / name
        package.mkdir()
        (package / "__init__.py").write_text(f"raise ImportError('this is the application\\'s own {name}')\n")
    return python


def test_with_the_server_extra_every_binary_runs_the_product(
    with_server: Path, product_env: dict[str, str], mongo_db: Database[dict[str, object]], tmp_path: Path
) -> None:
    jobsched = str(with_server.parent / "jobsched")
    assert [d for d in SERVER_DRIVERS if d not in installed_names(with_server)] == []
    api_port = free_port()
    env = {**product_env, "API_PORT": str(api_port), "PATH": os.environ["PATH"], "PYTHONPATH": ""}
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
    assert run(
        with_server, "-c", "import jobsched.server; print(jobsched.server.Embedded.__module__)", cwd=tmp_path
    ).strip() == ("jobsched._server.services.embedded.node")


def healthy(binary: ServiceProcess) -> bool:
    assert binary.process.poll() is None, binary.log_text()[-3000:]
    try:
        return httpx.get(f"http://127.0.0.1:{binary.metrics_port}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
