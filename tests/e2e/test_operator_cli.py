"""`jobsched jobs|dlq|schedules|workflows` as an operator types them, against `jobsched dev` with AUTH=required: every
command, its JSON output parsed, its table read, and the exit status a script relies on."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import jobsched
from shared.model import format_time, utc_now
from tests.e2e.devmode import JOBSCHED, Dev
from tests.e2e.test_declared_processes import V1, plugin
from tests.support import wait_until


class Operator:
    """Runs `jobsched` commands with a key and the API's URL in the environment, as an operator's shell has them."""

    def __init__(self, url: str, key: str | None) -> None:
        self.env = {**os.environ, "JOBSCHED_URL": url, "JOBSCHED_API_KEY": key or ""}

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([JOBSCHED, *args], capture_output=True, text=True, timeout=60, env=self.env, check=False)

    def json(self, *args: str, status: int = 0) -> Any:
        done = self.run(*args, "--output", "json")
        assert done.returncode == status, (args, done.returncode, done.stdout, done.stderr)
        return json.loads(done.stdout)

    def fails(self, status: int, *args: str) -> str:
        done = self.run(*args)
        assert done.returncode == status, (args, done.returncode, done.stdout, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr  # one line, no traceback
        return done.stderr


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[Dev]:
    node = Dev(tmp_path)
    node.start(AUTH="required")
    try:
        yield node
    finally:
        node.close()


def test_jobs_and_the_dlq_from_the_command_line(dev: Dev) -> None:
    key = dev.new_api_key("acme")
    operator = Operator(dev.base_url, key)
    with jobsched.Client(dev.base_url, key) as client:
        done = client.create("noop")
        failing = client.create("flaky", {"failRate": 1}, max_attempts=1)
        later = client.create("noop", scheduled_at=utc_now() + timedelta(hours=1))

    assert operator.json("jobs", "wait", done.id)["status"] == "completed"
    dead = operator.json("jobs", "wait", failing.id, status=1)  # ended, but not well: exit 1, the job shown
    assert dead["status"] == "dlq"
    assert f"job {failing.id} ended dlq" in operator.run("jobs", "wait", failing.id).stderr
    assert operator.fails(7, "jobs", "wait", later.id, "--timeout", "0.3")

    assert [j["id"] for j in operator.json("jobs", "list", "--status", "dlq")] == [failing.id]
    assert {j["id"] for j in operator.json("jobs", "list", "--type", "noop")} == {done.id, later.id}
    table = operator.run("jobs", "list").stdout.splitlines()
    assert table[0].split() == ["id", "tenantId", "jobType", "status", "runs", "failed", "scheduledAt", "lastError"]
    rows = {line.split()[0]: line.split() for line in table[1:]}
    assert rows[done.id][4:6] == ["1", "0/3"]  # completed at its first attempt: one run, nothing failed
    assert {line.split()[0] for line in table[1:]} == {done.id, failing.id, later.id}
    assert operator.json("jobs", "get", done.id)["id"] == done.id
    assert "status       completed" in operator.run("jobs", "get", done.id).stdout
    [attempt] = operator.json("jobs", "attempts", failing.id)
    assert (attempt["attempt"], attempt["outcome"]) == (1, "failed")
    assert "Traceback" not in operator.run("jobs", "attempts", failing.id).stdout
    traced = operator.run("jobs", "attempts", failing.id, "--traceback").stdout
    assert "attempt 1:\nTraceback (most recent call last)" in traced
    assert "failed on purpose" in traced.split("attempt 1:")[1]

    [group] = operator.json("dlq", "list")
    assert (group["count"], group["jobTypes"]) == (1, ["flaky"])
    assert "failed on purpose" in group["error"]
    assert operator.json("dlq", "retry", "--error", group["error"]) == {"redriven": [failing.id], "refused": []}
    assert operator.json("jobs", "wait", failing.id, status=1)["status"] == "dlq"  # it fails again
    assert operator.json("jobs", "retry", failing.id)["status"] == "pending"
    assert operator.json("jobs", "wait", failing.id, status=1)["status"] == "dlq"
    [row] = [line.split() for line in operator.run("jobs", "list").stdout.splitlines() if line.startswith(failing.id)]
    assert row[4:6] == ["3", "1/1"]  # three runs in all; of the budget since the last re-drive, one of one failed
    refused = operator.json("dlq", "retry", done.id, status=1)  # not a dead letter: refused, said so
    assert refused["redriven"] == []
    assert [r["id"] for r in refused["refused"]] == [done.id]

    assert operator.json("jobs", "cancel", later.id)["status"] == "cancelled"
    assert "409" in operator.fails(5, "jobs", "cancel", later.id)  # finished: the API refuses it
    assert "404" in operator.fails(3, "jobs", "get", "ffffffffffffffffffffffff")

    stranger = Operator(dev.base_url, dev.new_api_key("other"))
    assert "404" in stranger.fails(3, "jobs", "get", done.id)  # another tenant's job does not exist for it
    assert stranger.json("jobs", "list") == []
    assert "401" in Operator(dev.base_url, None).fails(4, "jobs", "list")
    assert Operator("http://127.0.0.1:1", key).fails(6, "jobs", "list")
    assert [
        j["id"] for j in json.loads(operator.run("--output", "json", "jobs", "list", "--status", "dlq").stdout)
    ] == [failing.id]  # the options before the command work too
    usage = operator.run("jobs", "list", "--status", "lost")
    assert usage.returncode == 2
    assert "invalid choice" in usage.stderr


def test_schedules_from_the_command_line(dev: Dev) -> None:
    key = dev.new_api_key("acme")
    operator = Operator(dev.base_url, key)
    with jobsched.Client(dev.base_url, key) as client:
        nightly = client.create("noop", cron="0 3 * * *", timezone="Europe/Berlin")
        client.create("noop")  # a one-off job: not a schedule

    [listed] = operator.json("schedules", "list")
    assert (listed["id"], listed["cron"]) == (nightly.id, "0 3 * * *")
    table = operator.run("schedules", "list").stdout.splitlines()
    assert table[1].split()[:5] == [nightly.id, "noop", "cron", "0", "3"]
    shown = operator.json("schedules", "get", nightly.id, "--next", "3")
    assert shown["timezone"] == "Europe/Berlin"
    assert len(shown["upcoming"]) == 3
    assert "upcoming" in operator.run("schedules", "get", nightly.id).stdout

    paused = operator.json("schedules", "pause", nightly.id, "--note", "vendor maintenance")
    assert (paused["paused"], paused["pauseNote"]) == (True, "vendor maintenance")
    assert operator.json("schedules", "get", nightly.id)["upcoming"] == []
    assert operator.json("schedules", "resume", nightly.id)["paused"] is False

    run = operator.json("schedules", "trigger", nightly.id, "--key", "by-hand-1")
    assert run["templateId"] == nightly.id
    assert operator.json("schedules", "trigger", nightly.id, "--key", "by-hand-1")["id"] == run["id"]
    start = (utc_now() - timedelta(days=3)).replace(hour=0, minute=0, second=0, microsecond=0)
    backfilled = operator.json(
        "schedules",
        "backfill",
        nightly.id,
        "--start",
        format_time(start),
        "--end",
        format_time(start + timedelta(days=2)),
    )
    assert backfilled == {"spawned": 2, "existing": 0, "skipped": 0}
    runs = operator.json("schedules", "runs", nightly.id)
    assert run["id"] in {r["id"] for r in runs}
    assert len(runs) == 3
    assert "400" in operator.fails(5, "schedules", "backfill", nightly.id, "--start", "yesterday", "--end", "today")


SCHEDULES_FILE = """
[[schedule]]
name = "weekly-digest"
job_type = "noop"
cron = "0 9 * * MON"
timezone = "Europe/Berlin"
payload = { list = "all" }

[[schedule]]
name = "hourly-sync"
job_type = "noop"
interval = "1h"
overlap = "skip"
"""


def test_schedules_applied_from_a_file_print_their_diff(dev: Dev, tmp_path: Path) -> None:
    operator = Operator(dev.base_url, dev.new_api_key("acme"))
    file = tmp_path / "schedules.toml"
    file.write_text(SCHEDULES_FILE)

    dry = operator.run("schedules", "apply", str(file), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines() == [
        "dry run: nothing was changed",
        "+ weekly-digest",
        "+ hourly-sync",
        "0 unchanged",
    ]
    assert operator.json("schedules", "list") == []

    assert operator.run("schedules", "apply", str(file)).stdout.splitlines()[:2] == ["+ weekly-digest", "+ hourly-sync"]
    listed = {s["idempotencyKey"]: s for s in operator.json("schedules", "list")}
    assert (listed["weekly-digest"]["declaredBy"], listed["hourly-sync"]["overlap"]) == ("file", "skip")

    file.write_text(SCHEDULES_FILE.replace("0 9 * * MON", "0 10 * * MON").split('[[schedule]]\nname = "hourly')[0])
    changed = operator.run("schedules", "apply", str(file), "--removed", "pause")
    assert changed.returncode == 0, changed.stderr
    assert changed.stdout.splitlines() == [
        "~ weekly-digest",
        "    cron: 0 9 * * MON -> 0 10 * * MON",
        "- hourly-sync (not in the file: paused)",
        "0 unchanged",
    ]
    applied = operator.json("schedules", "apply", str(file))
    assert (applied["unchanged"], applied["removed"]) == (["weekly-digest"], ["hourly-sync"])

    file.write_text('[[schedule]]\nname = "x"\njob_type = "noop"\ncron = "0 9 * * *"\nevery = "day"\n')
    assert "unknown key 'every'" in operator.fails(2, "schedules", "apply", str(file))
    file.write_text("schedule = [1]\n")
    assert "is not a table" in operator.fails(2, "schedules", "apply", str(file))
    file.write_text('[[schedule]]\nname = "x"\njob_type = "noop"\ncron = "0 9 * * *"\npayload = { day = 2026-12-04 }\n')
    assert "payload" in operator.fails(2, "schedules", "apply", str(file))
    bounded = '[[schedule]]\nname = "x"\njob_type = "noop"\ncron = "0 9 * * *"\nstart_at = "{}"\n'
    file.write_text(bounded.format("2027-01-04T09:00:00+01:00"))  # as text, with its offset: taken
    assert operator.run("schedules", "apply", str(file), "--dry-run").stdout.splitlines()[1] == "+ x"
    file.write_text(bounded.format("2027-01-04T09:00:00"))
    assert "start_at '2027-01-04T09:00:00' has no offset" in operator.fails(2, "schedules", "apply", str(file))
    file.write_text(bounded.format("next monday"))
    assert "start_at 'next monday' is not a date-time" in operator.fails(2, "schedules", "apply", str(file))
    file.write_text('[[schedule]]\nname = "x"\njob_type = "noop"\ncron = "61 9 * * *"\n')
    assert "400" in operator.fails(5, "schedules", "apply", str(file))


def test_an_empty_schedule_listing_points_at_the_schedules_declared_in_code(tmp_path: Path) -> None:
    node = Dev(tmp_path)
    node.start(AUTH="required", **plugin(tmp_path / "plugin", V1))
    try:
        admin = node.new_api_key("acme", "admin")
        in_acme = Operator(node.base_url, admin)
        in_acme.env["JOBSCHED_TENANT"] = "acme"
        hint = "(none in this tenant; 3 schedules declared in code are in tenant 'default': --tenant default)"
        assert wait_until(lambda: hint in in_acme.run("schedules", "list").stdout, 30, "the declared schedules")
        assert in_acme.json("schedules", "list") == []  # JSON stays the bare answer
        declared = Operator(node.base_url, admin)
        declared.env["JOBSCHED_TENANT"] = "default"
        assert "none in this tenant" not in declared.run("schedules", "list").stdout
        # A key of another tenant cannot read tenant default: no hint, no error.
        listed = Operator(node.base_url, node.new_api_key("acme")).run("schedules", "list")
        assert (listed.returncode, listed.stderr) == (0, "")
        assert "none in this tenant" not in listed.stdout
    finally:
        node.close()


def test_workflows_from_the_command_line(dev: Dev) -> None:
    key = dev.new_api_key("acme")
    operator = Operator(dev.base_url, key)
    with jobsched.Client(dev.base_url, key) as client:
        flow = client.workflow("nightly", name="nightly-etl", scheduled_at=utc_now() + timedelta(hours=1))
        flow.chain(flow.step("extract", "noop"), flow.step("load", "noop"))
        later = flow.submit()
        now = client.workflow("now")
        now.step("only", "noop")
        done = client.wait_workflow(now.submit().id, timeout=30)
    assert done.status == "succeeded"

    assert [w["id"] for w in operator.json("workflows", "list")] == [done.id, later.id]
    assert [w["id"] for w in operator.json("workflows", "list", "--status", "running")] == [later.id]
    table = operator.run("workflows", "list").stdout
    assert later.id in table
    assert "nightly-etl" in table
    shown = operator.json("workflows", "get", later.id)
    assert [s["name"] for s in shown["steps"]] == ["extract", "load"]
    assert "extract" in operator.run("workflows", "get", later.id).stdout
    assert operator.json("workflows", "cancel", later.id)["status"] == "cancelled"
    assert "404" in operator.fails(3, "workflows", "get", "ffffffffffffffffffffffff")
    stranger = Operator(dev.base_url, dev.new_api_key("other"))
    assert "404" in stranger.fails(3, "workflows", "get", done.id)
    assert stranger.json("workflows", "list") == []


def test_batches_from_the_command_line(dev: Dev) -> None:
    key = dev.new_api_key("acme")
    operator = Operator(dev.base_url, key)
    with jobsched.Client(dev.base_url, key) as client:
        batch = client.batch("invoices", name="december", on_complete=jobsched.callback("noop"))
        client.add_to_batch(batch.id, "noop", [{}, {}])
    listed = operator.json("batches", "list")
    assert [(b["id"], b["status"]) for b in listed] == [(batch.id, "open")]
    assert "december" in operator.run("batches", "list").stdout
    sealed = operator.json("batches", "seal", batch.id)
    assert sealed["sealed"] is True
    with jobsched.Client(dev.base_url, key) as client:
        done = client.wait_batch(batch.id, timeout=30)
    assert (done.status, done.total) == ("succeeded", 2)
    shown = operator.run("batches", "get", batch.id).stdout
    assert "succeeded" in shown
    assert str(done.on_complete) in shown
    assert "404" in operator.fails(3, "batches", "get", "ffffffffffffffffffffffff")
    members = operator.json("batches", "members", batch.id)["jobs"]
    assert [m["status"] for m in members] == ["completed", "completed"]
    first = operator.run("batches", "members", batch.id, "--limit", "1").stdout
    assert members[0]["jobId"] in first
    cursor = f"completed.{members[0]['jobId']}"
    assert f"more: --after {cursor}" in first
    rest = operator.json("batches", "members", batch.id, "--after", cursor)
    assert rest == {"jobs": [members[1]], "next": None}
    assert operator.json("batches", "members", batch.id, "--status", "dlq") == {"jobs": [], "next": None}
    stranger = Operator(dev.base_url, dev.new_api_key("other"))
    assert "404" in stranger.fails(3, "batches", "get", batch.id)
    assert "404" in stranger.fails(3, "batches", "members", batch.id)
    assert stranger.json("batches", "list") == []
