"""The `seed` and `loadtest` command-line tools, run as a user runs them: as processes, against real stores."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pymongo.database import Database

from shared.model import parse_time
from tests.e2e.devmode import Dev
from tests.support import REPO_ROOT

SEEDED_TEMPLATES = 3
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run_tool(module: str, *args: str, env: dict[str, str] | None = None, timeout: float = 180) -> str:
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def inserted_and_present(output: str) -> tuple[int, int]:
    found = re.search(r"inserted (\d+), already present (\d+)", output)
    assert found, output
    return int(found.group(1)), int(found.group(2))


def test_seed_inserts_a_realistic_mix_once_per_run_id(mongo_uri: str, mongo_db: Database[dict[str, object]]) -> None:
    env = {"MONGO_URI": mongo_uri, "MONGO_DB": mongo_db.name}
    first = run_tool("seed", "--count", "200", "--run-id", "same", env=env)
    assert inserted_and_present(first) == (200 + SEEDED_TEMPLATES, 0)
    again = run_tool("seed", "--count", "200", "--run-id", "same", env=env)
    assert inserted_and_present(again) == (0, 200 + SEEDED_TEMPLATES)
    other = run_tool("seed", "--count", "10", "--run-id", "other", env=env)
    assert inserted_and_present(other) == (10 + SEEDED_TEMPLATES, 0)

    jobs: list[dict[str, Any]] = list(mongo_db["jobs"].find({"idempotencyKey": {"$regex": "^seed-same-"}}))
    runs = [j for j in jobs if j["kind"] == "run"]
    assert (len(runs), len(jobs) - len(runs)) == (200, SEEDED_TEMPLATES)
    types = Counter(str(j["jobType"]) for j in runs)
    assert set(types) == {"noop", "log-message", "flaky", "slow"}, types
    assert any(float(j["payload"]["failRate"]) == 1.0 for j in runs if j["jobType"] == "flaky")  # fills the DLQ
    assert len({j["tenantId"] for j in jobs}) >= 3
    now = datetime.now(UTC)
    due = [j["scheduledAt"] <= now for j in runs]
    assert 0 < sum(due) < len(runs), "both immediate and future jobs"
    assert len({j["priority"] for j in runs}) > 1


def test_loadtest_sends_open_loop_and_reports_stable_figures_and_a_histogram(dev: Dev, tmp_path: Path) -> None:
    dev.start()
    report, plot = tmp_path / "load.json", tmp_path / "latency.png"
    base_url = f"http://127.0.0.1:{dev.port}"
    args = ("--rate", "20", "--duration", "2s", "--base-url", base_url, "--settle", "60s")
    run_tool("loadtest", *args, "--future-share", "0.25", "--ahead", "1s", "--json", str(report), "--plot", str(plot))

    figures = json.loads(report.read_text())
    assert (figures["rate"], figures["sent"], figures["ok"], figures["finished"], figures["errors"]) == (
        20.0,
        40,
        40,
        40,
        {},
    )
    assert (figures["due_now"]["jobs"], figures["future"]["jobs"]) == (30, 10)
    summaries = {
        "ack_ms": figures["ack_ms"],
        "created_to_start_ms": figures["due_now"]["created_to_start_ms"],
        "e2e_ms": figures["due_now"]["e2e_ms"],
        "lateness_ms": figures["future"]["lateness_ms"],
        "due_to_end_ms": figures["future"]["due_to_end_ms"],
    }
    for name, summary in summaries.items():
        assert set(summary) >= {"p50", "p95", "p99", "max"}, summary
        assert 0 <= summary["p50"] <= summary["p95"] <= summary["p99"] <= summary["max"], (name, summary)
    assert figures["due_now"]["e2e_ms"]["p50"] > 0
    assert figures["achieved_rate"] > 10
    # End to end comes from the server's timestamps, not from when the tool happened to poll: the slowest due-now
    # job's figure is its last attempt's end - its createdAt, as the API tells them.
    jobs = dev.http.get("/jobs", params={"tenantId": figures["tenantId"], "limit": "100"}).json()
    slowest = 0.0
    for job in jobs:
        if parse_time(job["scheduledAt"]) <= parse_time(job["createdAt"]):  # due now
            [execution] = dev.http.get(f"/jobs/{job['id']}/executions").json()
            spent = parse_time(execution["finishedAt"]) - parse_time(job["createdAt"])
            slowest = max(slowest, spent.total_seconds() * 1000)
    assert figures["due_now"]["e2e_ms"]["max"] == round(slowest, 1)
    assert plot.read_bytes().startswith(PNG_MAGIC)


def test_loadtest_creates_in_its_keys_tenant_when_the_api_requires_keys(dev: Dev) -> None:
    key = dev.new_api_key("acme")
    dev.start(AUTH="required")
    args = ("--rate", "10", "--duration", "1s", "--base-url", dev.base_url, "--settle", "60s")

    refused = json.loads(run_tool("loadtest", *args, env={"JOBSCHED_API_KEY": ""}))
    assert (refused["ok"], refused["errors"]) == (0, {"401": 10})

    figures = json.loads(run_tool("loadtest", *args, "--tenant", "acme", env={"JOBSCHED_API_KEY": key}))
    assert (figures["tenantId"], figures["sent"], figures["ok"], figures["finished"], figures["errors"]) == (
        "acme",
        10,
        10,
        10,
        {},
    )
