"""Handler plug-ins in real processes: a package outside the project's packages, loaded into `jobsched dev` by
JOBSCHED_HANDLERS, by `--handlers` and by an installed distribution's entry point; bad plug-ins stop start-up
with exit status 2 and a message naming the module and the cause."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.e2e.devmode import Dev, start_failing
from tests.support import installed_distribution, wait_until

PLUGIN = """
    import jobsched

    jobs = jobsched.JobTypes()

    @jobs.handler("greet", max_attempts=2)
    def greet(payload: dict, ctx: jobsched.HandlerContext) -> None:
        if payload.get("fail"):
            raise jobsched.HandlerError("asked to fail")
        ctx.logger.info("hello", extra={"action": "greeted", "who": payload.get("who")})
"""


def write_plugin(directory: Path, name: str = "greeting_plugin", body: str = PLUGIN) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.py").write_text(textwrap.dedent(body))
    return directory


def job_status(dev: Dev, job_id: str) -> str:
    return str(dev.http.get(f"/jobs/{job_id}").json()["status"])


def run_greetings(dev: Dev) -> None:
    ok = dev.create("ok-1", "greet", {"who": "world"})
    failing = dev.create("fail-1", "greet", {"fail": True})
    wait_until(lambda: job_status(dev, ok) == "completed", 60, "the plug-in's job to complete")
    wait_until(lambda: job_status(dev, failing) == "dlq", 60, "the failing job to use its type's 2 attempts")
    assert dev.http.get(f"/jobs/{failing}").json()["maxAttempts"] == 2
    types = {t["name"]: t for t in dev.http.get("/job-types").json()}
    assert types["greet"]["executors"] == 1


@pytest.mark.parametrize("how", ["variable", "option"])
def test_dev_runs_a_plugin_named_by_the_variable_or_the_option(dev: Dev, tmp_path: Path, how: str) -> None:
    plugins = write_plugin(tmp_path / "plugins")
    env = {"PYTHONPATH": str(plugins)}
    if how == "variable":
        dev.start(JOBSCHED_HANDLERS="greeting_plugin:jobs", **env)
    else:
        dev.start("--handlers", "greeting_plugin", **env)
    run_greetings(dev)


def test_dev_runs_a_plugin_of_an_installed_distribution(dev: Dev, tmp_path: Path) -> None:
    site = write_plugin(tmp_path / "site")
    installed_distribution(site, "greeting_plugin_dist", "greetings = greeting_plugin")
    dev.start(PYTHONPATH=str(site))
    run_greetings(dev)


@pytest.mark.parametrize("service", ["executor", "dev"])
def test_a_plugin_that_does_not_import_stops_start_up_with_status_2(tmp_path: Path, service: str) -> None:
    plugins = write_plugin(tmp_path / "p", "broken_plugin", "import no_such_dependency_of_the_plugin\n")
    args = ["--type", "greet"] if service == "executor" else []
    done = start_failing(service, tmp_path, args, PYTHONPATH=str(plugins), JOBSCHED_HANDLERS="broken_plugin")
    assert done.returncode == 2, done.stderr
    assert (
        "handler module 'broken_plugin' failed to load: "
        "ModuleNotFoundError: No module named 'no_such_dependency_of_the_plugin'"
    ) in done.stderr


def test_a_name_registered_twice_stops_the_executor_with_status_2(tmp_path: Path) -> None:
    plugins = write_plugin(tmp_path / "p")
    write_plugin(plugins, "another_greeting", PLUGIN)
    done = start_failing(
        "executor",
        tmp_path,
        ["--type", "greet", "--handlers", "greeting_plugin,another_greeting"],
        PYTHONPATH=str(plugins),
    )
    assert done.returncode == 2, done.stderr
    assert (
        "handler module 'another_greeting' failed to load: DuplicateHandler: handler 'greet' is registered twice"
        in (done.stderr)
    )


def test_a_broken_entry_point_stops_dev_with_status_2(tmp_path: Path) -> None:
    site = write_plugin(tmp_path / "site", "raising_plugin", "raise RuntimeError('missing MAILER_URL')\n")
    installed_distribution(site, "raising_dist", "raising = raising_plugin")
    done = start_failing("dev", tmp_path, [], PYTHONPATH=str(site))
    assert done.returncode == 2, done.stderr
    assert "entry point 'raising' = 'raising_plugin' of raising_dist 1.0 failed to load" in done.stderr
    assert "RuntimeError: missing MAILER_URL" in done.stderr
