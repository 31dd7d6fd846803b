from __future__ import annotations

import math
import os
from datetime import UTC, datetime, timedelta

import pytest

from loadtest.benchkit import Run, ratio, server_setting
from loadtest.cpu import CpuWindow, machine_busy_s, process_cpu_s
from loadtest.scenarios.backlog import growth, series, verdict
from loadtest.scenarios.failover import spread
from loadtest.scenarios.lateness import gaps_ms, lateness_ms
from shared.config import ConfigError

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_ratio_is_above_one_when_jobsched_is_better() -> None:
    assert ratio(True, 300.0, 100.0) == 3.0  # a rate: jobsched ÷ baseline
    assert ratio(False, 50.0, 200.0) == 4.0  # a latency: baseline ÷ jobsched
    assert ratio(True, 0.0, 100.0) == 0.0
    assert ratio(False, 4.751, 0.014) == 0.00295  # three significant figures: a small ratio is not rounded to 0
    assert ratio(True, 5.0, 0.0) == math.inf
    assert math.isnan(ratio(False, math.nan, 1.0))


def test_run_rate_and_figures() -> None:
    run = Run("defaults", 500, 2.0)
    assert run.rate == 250.0
    assert run.figures() == {"jobs_per_s": 250.0, "jobs": 500, "seconds": 2.0, "setting": "defaults"}
    assert Run("none", 0, 0.0).rate == 0.0
    measured = Run("defaults", 500, 2.0, {"machine": 6.5, "own_processes": 1.3}).figures()
    assert measured["cpu_ms_per_job"] == {"machine": 6.5, "own_processes": 1.3}


def test_cpu_per_job_counts_the_work_done_in_its_window() -> None:
    pid = os.getpid()
    own_before = process_cpu_s(pid)
    assert own_before is not None
    window = CpuWindow()
    while (process_cpu_s(pid) or 0.0) - own_before < 0.2:  # burn 0.2 s of CPU in this process
        sum(range(10_000))
    own = (process_cpu_s(pid) or 0.0) - own_before
    figures = window.per_job(100, own)
    assert figures["own_processes"] == round(own * 1000 / 100, 2)
    assert figures["machine"] >= figures["own_processes"] * 0.9  # the machine ran at least this process
    assert window.per_job(0, own) == {}
    assert (machine_busy_s() or 0.0) > 0


def test_lateness_counts_unstarted_jobs_as_lower_bounds() -> None:
    scheduled = {"a": T0, "b": T0 + timedelta(seconds=1), "c": T0 + timedelta(seconds=2)}
    started = {"a": T0 + timedelta(milliseconds=120), "b": T0 + timedelta(seconds=1, milliseconds=5)}
    values, censored = lateness_ms(scheduled, started, ended=T0 + timedelta(seconds=10))
    assert sorted(values) == [5.0, 120.0, 8000.0]
    assert censored == 1


def test_lateness_ignores_starts_of_jobs_not_measured() -> None:
    values, censored = lateness_ms({"a": T0}, {"a": T0, "warm-up": T0}, ended=T0)
    assert values == [0.0]
    assert censored == 0


def test_gaps_only_between_jobs_that_have_both_times() -> None:
    queued = {"a": T0 + timedelta(milliseconds=300), "b": T0}
    started = {"a": T0 + timedelta(milliseconds=310)}
    assert gaps_ms(queued, started) == [10.0]


def test_spread_reports_nearest_rank_median_and_max() -> None:
    assert spread([9.7, 9.1, 10.2]) == {"p50": 9.7, "max": 10.2, "runs": [9.7, 9.1, 10.2]}


def test_backlog_growth_and_verdict() -> None:
    results = {1000: {"claim_due_ms": 50.0}, 100_000: {"claim_due_ms": 400.0}}
    assert series(results, "claim_due_ms") == {"1000": 50.0, "100000": 400.0}
    assert series(results, "claim_due_ms", per=500) == {"1000": 0.1, "100000": 0.8}
    assert growth({"1000": 50.0, "100000": 400.0}) == 8.0
    assert "GROWS" in verdict("ferretdb-v2.7.0", "claim_due", {"1000": 50.0, "100000": 400.0})
    assert "does not grow" in verdict("sqlite", "claim_due", {"1000": 1.0, "100000": 1.2})


def test_a_server_address_not_set_is_a_one_line_error_that_says_how_to_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_BROKERS", raising=False)
    with pytest.raises(ConfigError, match=r"KAFKA_BROKERS is not set: .*servers.sh env"):
        server_setting("KAFKA_BROKERS")
    monkeypatch.setenv("KAFKA_BROKERS", "127.0.0.1:19092")
    assert server_setting("KAFKA_BROKERS") == "127.0.0.1:19092"
