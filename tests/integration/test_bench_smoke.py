"""Every `python -m loadtest.bench` scenario once, at a tiny size, against the real servers: it runs to the end
and writes the JSON with the stable keys and positive figures. (The numbers at this size mean nothing.)"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loadtest.bench import SCENARIOS, main

TINY: dict[str, list[str]] = {
    "dispatch": ["--jobs", "200", "--reference-seconds", "3"],
    "drain": ["--jobs", "100", "--reference-seconds", "15"],
    "embedded": ["--jobs", "200", "--reference-seconds", "8"],
    "lateness": ["--rate", "20", "--window", "2", "--settle", "1"],
    "api": ["--clients", "4", "--duration", "0.5", "--rate", "40", "--open-duration", "1"],
    "failover": ["--repeat", "1", "--lease-ttl", "2"],
    "peer": ["--jobs", "100"],
    "backlog": ["--sizes", "50,200", "--due", "20", "--repeat", "2", "--singles", "3"],
    "console": ["--jobs", "500", "--repeat", "2", "--lifecycle-jobs", "50"],
    "peers-embedded": ["--jobs", "200"],
    "peers-celery": ["--jobs", "100", "--rate", "20", "--window", "2", "--settle", "2"],
    "lateness-embedded": ["--rate", "20", "--window", "2", "--settle", "2"],
    "due-now": ["--mode", "distributed", "--rate", "20", "--duration", "1", "--settle", "10"],
    "keepalive": ["--mode", "distributed", "--requests", "20"],
    "bulk": ["--clients", "2", "--duration", "0.5", "--batch", "50", "--batch-clients", "2", "--load", "200"],
    "retention-soak": ["--rate", "100", "--duration", "4", "--keep", "1", "--reaper", "1", "--sample", "1"],
    "scale": ["--jobs", "3000", "--tenants", "10", "--due", "200", "--repeat", "2", "--drains", "1"],
    "fairness": ["--backlog", "10000", "--repeat", "3", "--timeout", "60"],
    "limits": ["--noop", "2000", "--slow", "100", "--repeat", "1"],
    "progress": ["--items", "400000"],  # long enough (a few seconds) for a heartbeat or two to write a report
    "store-work": ["--jobs", "2", "--runs", "2", "--drain", "40"],
    "hot-second": ["--mode", "distributed", "--jobs", "200", "--tenants", "5", "--lead", "10", "--time-box", "120"],
    "chain": ["--length", "5", "--time-box", "60"],
    "fan": ["--width", "100", "--members", "200", "--time-box", "60"],
    "claim-reads": ["--sizes", "200,400", "--repeat", "2"],
    "tracing": ["--jobs", "200", "--repeat", "1"],
}
# The figures that must be measured (> 0) in each scenario's JSON, as paths.
HEADLINES: dict[str, list[str]] = {
    "dispatch": ["jobsched.jobs_per_s", "baseline.jobs_per_s"],
    "drain": ["jobsched.jobs_per_s", "baseline.jobs_per_s", "jobsched.cpu_ms_per_job.machine"],
    "embedded": ["jobsched.jobs_per_s", "baseline.jobs_per_s"],
    # (jobsched's lateness may be 0 ms: wake-ups claimed ahead of time are started on the due millisecond)
    "lateness": ["baseline.lateness_ms.p99", "jobsched.started"],
    "api": ["jobsched.requests_per_s", "baseline.requests_per_s", "jobsched.open_loop.ack_ms.p99"],
    "failover": ["jobsched.kill9_s.p50", "jobsched.sigterm_s.p50", "baseline.kill9_s"],
    "peer": [
        "jobsched.jobs_per_s",
        "baseline.jobs_per_s",
        "jobsched.cpu_ms_per_job.machine",
        "jobsched.cpu_ms_per_job.own_processes",
        "baseline.cpu_ms_per_job.machine",
        "baseline.cpu_ms_per_job.own_processes",
    ],
    "backlog": ["jobsched.claim_due_ms.200", "baseline.claim_next_ms.200", "jobsched.sqlite.claim_due_ms.200"],
    "console": ["jobsched.deep_page_cursor_ms", "baseline.deep_page_offset_ms", "jobsched.lifecycle_jobs_per_s"],
    "peers-embedded": [
        "jobsched.jobs_per_s",
        "jobsched.cpu_ms_per_job.own_processes",
        "jobsched.peak_rss_mb",
        "baseline.huey.jobs_per_s",
        "baseline.huey.cpu_ms_per_job.own_processes",
        "baseline.apscheduler.jobs_per_s",
        "baseline.apscheduler.cpu_ms_per_job.own_processes",
        "ratios.huey",
        "ratios.apscheduler",
    ],
    "peers-celery": [
        "jobsched.drain.jobs_per_s",
        "jobsched.drain.cpu_ms_per_job.own_processes",
        "jobsched.lateness.started",
        "baseline.drain.jobs_per_s",
        "baseline.drain.cpu_ms_per_job.own_processes",
        "baseline.lateness.started",
        "baseline.lateness.lateness_ms.max",
    ],
    "lateness-embedded": ["jobsched.started", "baseline.started", "baseline.lateness_ms.max"],
    "due-now": ["jobsched.due_now.finished", "jobsched.due_now.created_to_start_ms.max", "baseline.started"],
    "keepalive": ["jobsched.POST /jobs.ms.p50", "baseline.GET /jobs/{id}.ms.p99", "jobsched.GET /healthz.requests"],
    "bulk": ["jobsched.jobs_per_s", "baseline.jobs_per_s", "jobsched.load.jobs_per_s"],
    "retention-soak": ["jobsched.final_mb", "baseline.final_mb", "jobsched.deleted", "baseline.completed"],
    "scale": ["jobsched.drain.jobs_per_s", "baseline.drain.jobs_per_s", "jobsched.reads_ms.overview.p99"],
    "fairness": ["jobsched.created_to_start_ms.max", "baseline.created_to_start_ms.max", "jobsched.backlog_left"],
    "progress": ["jobsched.handler_s", "baseline.handler_s", "jobsched.reports_seen", "jobsched.us_per_item"],
    "store-work": [
        "jobsched.one-off.write_commands",
        "jobsched.one-off.index_entries_documentdb",
        "jobsched.fails once.documents_written",
        "jobsched.template run.write_commands",
        "jobsched.drain.write_commands",
        "baseline.drain.write_commands",
    ],
    "hot-second": ["jobsched.ran", "jobsched.drained_s", "jobsched.healthz_ms.max", "jobsched.peak_rss_mb"],
    "chain": ["jobsched.chain_s", "jobsched.link_ms.max", "baseline.chain_s", "baseline.link_ms.max"],
    "fan": ["jobsched.fan.fan_s", "jobsched.independent.drain_s", "baseline.drain_s"],
    "claim-reads": [
        "jobsched.lanes_ms",
        "jobsched.lane_read_1_ms",
        "baseline.lane_read_64_ms",
        "jobsched.lanes_together_ms",
    ],
    "tracing": ["jobsched.jobs_per_s", "baseline.jobs_per_s", "jobsched.cpu_ms_per_job.own_processes"],
    "limits": [
        "jobsched.noop_jobs_per_s",
        "baseline.noop_jobs_per_s",
        "jobsched.slow_peak_concurrency",
        "jobsched.with_key_rate.slow_busiest_key_second",
    ],
}
# Figures that must equal a count the smoke run asked for (every job ran), as paths.
EXACT: dict[str, dict[str, int]] = {
    "peers-embedded": {"jobsched.jobs": 200, "baseline.huey.jobs": 200, "baseline.apscheduler.jobs": 200},
    "chain": {"jobsched.links": 4, "baseline.links": 4},
    "fan": {"jobsched.independent.ran": 100, "jobsched.fan.ran": 102, "jobsched.batch.ran": 200},
    "claim-reads": {"jobsched.due_runs": 400, "jobsched.lane_runs": 4, "baseline.due_runs": 200},
    "tracing": {"jobsched.jobs": 200, "baseline.jobs": 200},
}
# Scenarios with a test of their own, which checks their JSON as check_written does and more.
RUN_APART = {"soak": "tests/integration/test_bench_soak.py"}
STABLE_KEYS = {"scenario", "jobsched", "baseline", "ratio", "machine", "store"}
# Figures that may be negative: due → claimed is negative for runs claimed ahead of their time; created → claimed
# too, by a few milliseconds, for a job created while a claim pass runs (its queuedAt is the pass's clock reading,
# taken before the pass reads the store and finds the new job).
SIGNED = (
    "jobsched.due_to_claim_ms.",
    "baseline.due_to_claim_ms.",
    "jobsched.lateness.due_to_claim_ms.",
    "jobsched.created_to_claim_ms.",
    "baseline.created_to_claim_ms.",
    "jobsched.late_tenant_wait_ms",  # the other tenant's start against its due time, rounded by the store's clock
    "jobsched.late_tenant_claimed_ms",  # and its claim, which may come ahead of its due time
    "jobsched.due_after_seeding_s",  # negative when the burst fell due before its writes ended (said in the output)
)
STORES = re.compile(r"sqlite|(ferretdb|mongodb)-v?\d+[.]\d+[.]\d+")


def numbers(value: Any, path: str = "") -> Iterator[tuple[str, float]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from numbers(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for n, item in enumerate(value):
            yield from numbers(item, f"{path}[{n}]")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield path, float(value)


def at(result: dict[str, Any], path: str) -> Any:
    for key in path.split("."):
        result = result[key]
    return result


def test_every_scenario_has_a_smoke_run() -> None:
    assert set(TINY) == set(HEADLINES)
    assert set(EXACT) <= set(TINY)
    assert set(TINY) | set(RUN_APART) == set(SCENARIOS)
    assert not set(TINY) & set(RUN_APART)


@pytest.mark.usefixtures("servers")
@pytest.mark.parametrize("scenario", sorted(TINY))
def test_scenario_runs_and_writes_its_figures(scenario: str, tmp_path: Path) -> None:
    out = tmp_path / f"{scenario}.json"
    result = check_written(scenario, main([scenario, *TINY[scenario], "--json", str(out)]), out, HEADLINES[scenario])
    for path, expected in EXACT.get(scenario, {}).items():
        assert at(result, path) == expected, path


def check_written(scenario: str, returned: dict[str, Any], out: Path, headlines: list[str]) -> dict[str, Any]:
    """The JSON at `out` is what the run returned, with the stable keys, and `headlines` measured (> 0); every
    figure of jobsched and baseline finite, and not negative unless SIGNED. Returns it."""
    result: dict[str, Any] = json.loads(out.read_text())
    assert result == json.loads(json.dumps(returned))
    assert result.keys() >= STABLE_KEYS
    assert result["scenario"] == scenario
    assert STORES.fullmatch(result["store"]), result["store"]
    assert result["machine"]["cpus"] >= 1
    assert result["ratio"] > 0
    for path in headlines:
        assert at(result, path) > 0, path
    for path, value in numbers({"jobsched": result["jobsched"], "baseline": result["baseline"]}):
        assert math.isfinite(value), path
        assert value >= 0 or path.startswith(SIGNED), path
    return result
