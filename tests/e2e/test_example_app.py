"""The example application (examples/): its two job types run in `jobsched dev` and in the distributed
stack (executors with the plug-in, by JOBSCHED_HANDLERS and by entry point; the API and the scheduler without
it), fed by its script through the client."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx2 as httpx

from tests.conftest import Launch
from tests.e2e.devmode import Dev
from tests.support import REPO_ROOT, free_port, installed_distribution, wait_until

EXAMPLES = REPO_ROOT / "examples"
TYPES = ("example.notify", "example.write-file")


def plugin_env(output: Path) -> dict[str, str]:
    return {
        "JOBSCHED_HANDLERS": "jobsched_example.handlers",
        "PYTHONPATH": str(EXAMPLES),
        "EXAMPLE_OUTPUT_DIR": str(output),
    }


def run_app(base_url: str, output: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobsched_example.app", "--base-url", base_url, "--files", "3", "--notifications", "3"],
        env={**os.environ, **plugin_env(output)},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def assert_app_succeeded(done: subprocess.CompletedProcess[str], output: Path) -> None:
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert sum(line.endswith(": completed") for line in lines) == 6, done.stdout
    assert "notifications received: 3 of 3" in lines
    assert len(list(output.glob("report-*.txt"))) == 3
    assert not list(output.glob(".*")), "no partial file is left behind"


def test_the_example_app_in_jobsched_dev(dev: Dev, tmp_path: Path) -> None:
    output = tmp_path / "out"
    dev.start(**plugin_env(output))
    assert_app_succeeded(run_app(dev.base_url, output), output)


def test_the_example_app_in_the_distributed_stack(launch: Launch, tmp_path: Path) -> None:
    output = tmp_path / "out"
    port = free_port()
    api = launch("api", API_PORT=str(port))  # no plug-in: it learns the types from the executors' announcements
    launch("scheduler")
    # One executor names the module in JOBSCHED_HANDLERS; the other finds it as an installed distribution's
    # entry point (the package's own, as pip would record it), with no setting at all.
    launch("executor", "--type", "example.write-file", name="executor-files", **plugin_env(output))
    site = tmp_path / "site"
    site.mkdir()
    installed_distribution(site, "jobsched_example", "example = jobsched_example.handlers")
    by_entry_point = {**plugin_env(output), "PYTHONPATH": f"{site}:{EXAMPLES}"}
    del by_entry_point["JOBSCHED_HANDLERS"]
    launch("executor", "--type", "example.notify", name="executor-notify", **by_entry_point)
    base_url = f"http://127.0.0.1:{port}"

    def served() -> bool:
        assert api.process.poll() is None, api.log_text()[-3000:]
        try:
            listing = httpx.get(f"{base_url}/job-types", timeout=5).json()
        except httpx.HTTPError:
            return False
        return all(any(t["name"] == name and t["executors"] >= 1 for t in listing) for name in TYPES)

    wait_until(served, 90, "the API to list the executors' announced types")
    assert_app_succeeded(run_app(base_url, output), output)
