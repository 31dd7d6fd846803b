"""Schedules declared in a handler module, kept by real processes: two executors of one version started at once, a
new version deployed beside the old one and then alone (on MongoDB, and on one SQLite file the processes share),
and `jobsched dev` restarted with changed code on its SQLite file."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.backends import Backend, open_backend, sqlite_url
from shared.model import Job
from shared.store.browse import JobQuery
from tests.conftest import Launch
from tests.e2e.devmode import Dev, start_failing
from tests.support import ServiceProcess, wait_until

V1 = """
    import jobsched

    jobs = jobsched.JobTypes()

    @jobs.handler("digest", schedule=[
        jobsched.Schedule("weekly", cron="0 9 * * MON", timezone="Europe/Berlin", payload={"list": "all"}),
        jobsched.Schedule("hourly", interval="1h"),
        jobsched.Schedule("nightly", cron="0 3 * * *", overlap="skip"),
    ])
    def digest(payload: dict, ctx: jobsched.HandlerContext) -> None:
        pass
"""
# The next version: weekly moves to 10:00, hourly is dropped, nightly is unchanged.
V2 = V1.replace('"0 9 * * MON"', '"0 10 * * MON"').replace('jobsched.Schedule("hourly", interval="1h"),', "")


def plugin(directory: Path, code: str) -> dict[str, str]:
    directory.mkdir(parents=True)
    (directory / "digests.py").write_text(textwrap.dedent(code))
    return {"PYTHONPATH": str(directory), "JOBSCHED_HANDLERS": "digests:jobs"}


def templates(backend: Backend) -> dict[str, Job]:
    page = backend.browser.page("default", JobQuery(templates=True, limit=100))
    made = {t.idempotencyKey: t for t in page}
    assert len(made) == len(page), f"a schedule made twice: {sorted(t.idempotencyKey for t in page)}"
    return made


def logged(process: ServiceProcess, action: str) -> bool:
    return f'"action": "{action}"' in process.log_text()


@pytest.fixture(params=[pytest.param("mongo", marks=pytest.mark.servers), "sqlite"])
def store_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Backend, dict[str, str]]]:
    """The store the executors share: the test's MongoDB database, or one SQLite file (MONGO_URI names any
    store's URL) that the processes open side by side."""
    if request.param == "mongo":
        env: dict[str, str] = request.getfixturevalue("product_env")
        opened = open_backend(env["MONGO_URI"], database=env["MONGO_DB"])
        yield opened, {}
    else:
        url = sqlite_url(str(tmp_path / "jobs.db"))
        opened = open_backend(url)
        opened.jobs.ensure_schema()
        yield opened, {"MONGO_URI": url}
    opened.close()


def test_executors_keep_declared_schedules_through_a_rolling_deploy(
    launch: Launch, store_env: tuple[Backend, dict[str, str]], tmp_path: Path
) -> None:
    backend, store = store_env
    v1 = {**plugin(tmp_path / "v1", V1), **store}
    old = [launch("executor", "--type", "digest", name=f"old-{n}", **v1) for n in range(2)]  # at once
    wait_until(lambda: sorted(templates(backend)) == ["hourly", "nightly", "weekly"], 60, "the three schedules")
    wait_until(lambda: all(logged(p, "schedules_reconciled") for p in old), 60, "both executors to reconcile")
    assert len(templates(backend)) == 3  # both applied them: each schedule was made once
    before = templates(backend)

    new = launch("executor", "--type", "digest", name="new", **plugin(tmp_path / "v2", V2), **store)
    wait_until(lambda: logged(new, "schedules_waiting"), 60, "the new version to see the old one")
    assert templates(backend) == before  # side by side: nothing changes

    for process in old:
        process.stop()  # SIGTERM: the executor withdraws its announcement
    wait_until(lambda: templates(backend)["weekly"].cron == "0 10 * * MON", 60, "the new version to apply")
    after = templates(backend)
    assert after["weekly"].id == before["weekly"].id  # updated in place
    assert after["nightly"] == before["nightly"]
    assert after["hourly"].status.value == "pending"  # dropped from the code: reported, kept (the default)
    wait_until(lambda: logged(new, "schedule_not_declared"), 30, "the dropped schedule to be reported")


def test_dev_restarted_with_changed_code_updates_its_schedules_in_place(dev: Dev, tmp_path: Path) -> None:
    first = dev.start(**plugin(tmp_path / "v1", V1))
    listed = {t["idempotencyKey"]: t for t in dev.http.get("/jobs", params={"tenantId": "default"}).json()}
    assert sorted(listed) == ["hourly", "nightly", "weekly"]
    assert {t["declaredBy"] for t in listed.values()} == {"code"}
    refused = dev.http.patch(f"/jobs/{listed['weekly']['id']}", json={"cron": "0 8 * * *"})
    assert refused.status_code == 409
    assert "declared in the code" in refused.json()["error"]
    first.stop()

    dev.start(**plugin(tmp_path / "v2", V2), DECLARED_SCHEDULES_REMOVED="pause")
    now = {t["idempotencyKey"]: t for t in dev.http.get("/jobs", params={"tenantId": "default"}).json()}
    assert now["weekly"]["id"] == listed["weekly"]["id"]
    assert now["weekly"]["cron"] == "0 10 * * MON"
    assert now["hourly"]["paused"] is True
    assert now["nightly"] == listed["nightly"]


@pytest.mark.parametrize("service", ["executor", "dev"])
def test_a_declaration_the_api_would_refuse_stops_start_up_with_status_2(tmp_path: Path, service: str) -> None:
    broken = plugin(tmp_path / "broken", V1.replace('"0 3 * * *"', '"61 3 * * *"'))
    args = ["--type", "digest"] if service == "executor" else []
    done = start_failing(service, tmp_path, args, **broken)
    assert done.returncode == 2, done.stderr
    assert "schedule 'nightly' of job type 'digest'" in done.stderr
