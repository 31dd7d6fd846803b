"""`python -m loadtest.bench soak` at CI size: the whole distributed stack (API, two schedulers, two executors, a
reaper deleting finished jobs after 5 s) under 20 jobs/s for half a minute, in windows of 6 s. Its report must
have every window, and no job lost: each one followed to the status its kind must reach, although retention
deleted jobs meanwhile. Its timing figures and verdict are reported, never asserted here."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtest.bench import main
from tests.integration.test_bench_smoke import check_written

CI_SIZE = ["--minutes", "0.5", "--rate", "20", "--window-minutes", "0.1", "--settle-seconds", "60"]
FAST_RETENTION = ["--retain-seconds", "5", "--reaper-seconds", "2"]
HEADLINES = ["jobsched.created", "jobsched.completed", "jobsched.achieved_rate", "jobsched.create_ms.p99"]
TARGETS = {
    "no_crashes",
    "no_corruption",
    "no_lost_job",
    "no_stuck_operation",
    "outcomes_as_expected",
    "no_missed_read",
    "create_ms_no_drift",
    "lateness_ms_no_drift",
    "rate_sustained",
}


@pytest.mark.usefixtures("servers")
def test_the_soak_follows_every_job_to_its_end_and_reports_each_window(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    result = check_written("soak", main(["soak", *CI_SIZE, *FAST_RETENTION, "--json", str(out)]), out, HEADLINES)
    assert result["complete"] is True
    assert result["processes_exited"] == []

    windows = result["windows"]
    assert [w["window"] for w in windows] == list(range(len(windows)))
    assert len(windows) >= 5  # 30 s of load in windows of 6 s, then the settle's
    jobs = result["jobsched"]
    assert sum(w["created"] for w in windows) == jobs["created"]
    assert sum(w["completed"] for w in windows) == jobs["completed"]

    lost = result["lost_jobs"]
    assert lost["not_final"] == 0, lost
    assert lost["vanished_before_final"]["count"] == 0, lost
    assert lost["vanished_unverified"]["count"] == 0, lost
    assert lost["unexpected_outcomes"]["count"] == 0, lost
    assert lost["missed_by_a_read"]["count"] == 0, lost  # a read by ids that left out a job that was there
    assert jobs["lost"] == 0
    assert result["targets"]["no_lost_job"]["met"]
    # every kind of the mix ended as it must, among them the template's runs; and retention deleted meanwhile
    assert jobs["completed"] > jobs["template_runs"] > 0
    assert jobs["dlq"] > 0
    assert jobs["cancelled"] > 0
    assert result["counters"]["retention_deleted"] > 0

    assert set(result["targets"]) == TARGETS
    assert all(isinstance(t["met"], bool) for t in result["targets"].values())
    assert isinstance(result["verdict"]["clean"], bool)
    assert result["verdict"]["drift_rule"]
    assert set(result["server_logs"]) >= {"crashes", "corruption", "ferretdb_errors"}
