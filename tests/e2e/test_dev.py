"""`jobsched dev` as a real process: the whole product on SQLite with no server, and crash recovery."""

from __future__ import annotations

import contextlib
import errno
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx

from shared.config import Settings
from tests.e2e.devmode import NO_SERVERS, Dev
from tests.support import ServiceProcess, free_port, wait_until


def test_a_job_completes_with_no_server_installed(dev: Dev) -> None:
    process = dev.start()
    assert f"console {dev.base_url}/ui/" in process.log_text()  # where to look, once the API answers
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


def test_a_new_database_file_is_private_and_an_existing_readable_one_is_warned_about(dev: Dev) -> None:
    first = dev.start()
    first.terminate()
    assert dev.db.stat().st_mode & 0o777 == 0o600  # every tenant's payloads: the owner's only
    dev.db.chmod(0o644)  # as earlier versions left it
    again = dev.start()
    wait_until(lambda: "database_file_readable" in again.log_text(), 30, "the warning about the readable file")
    assert dev.db.stat().st_mode & 0o777 == 0o644  # the operator's mode is kept; the log says what to do


@contextlib.contextmanager
def port_taken(port: int) -> Iterator[None]:
    """The port held by a listener of this test for its duration (or by whoever holds it already)."""
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", port))
        holder.listen()
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
    try:
        yield
    finally:
        holder.close()


def test_a_taken_default_metrics_port_does_not_stop_dev_and_the_ready_line_says_where(tmp_path: Path) -> None:
    default = Settings().metrics_port
    port = free_port()
    env = {**NO_SERVERS, "API_PORT": str(port), "JOBSCHED_DB": str(tmp_path / "jobsched.db")}
    with port_taken(default):
        process = ServiceProcess("dev", env, tmp_path, "dev", metrics_port=False)
        try:
            ready = wait_until(
                lambda: re.search(r"metrics (http://127\.0\.0\.1:(\d+)/metrics)", process.log_text()),
                60,
                "jobsched dev to be ready",
            )
            assert "metrics_port_taken" in process.log_text()
            assert int(ready.group(2)) != default
            assert "process_cpu_seconds_total" in httpx.get(ready.group(1)).text
            assert httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200
        finally:
            process.stop()
