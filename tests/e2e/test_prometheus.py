"""A real Prometheus scraping the local stack (`stack.sh up`: API, two schedulers, one executor per job type,
the reaper, as real processes on the real servers).

The stack runs with its own state dir, ports, database, topic prefix and election key, so it neither needs nor
disturbs a `make up` stack or other tests. After a burst of jobs through the API: Prometheus' HTTP API returns
the executor throughput and scheduler tick series, every dashboard expression evaluates, and every metric the
Grafana dashboard queries is in the live /metrics output of the stack's processes.
"""

from __future__ import annotations

import collections
import json
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from shared.handlers.builtin import builtin_types
from tests.deployments.manifests import (
    DASHBOARD_FILE,
    dashboard_expressions,
    dashboard_metric_names,
    exposed_metric_names,
    load_json,
)
from tests.e2e.stackkit import drop_database, logs_tail, script, stack_env
from tests.support import free_port, wait_until

BUILTIN_TYPES = builtin_types(demo=True)  # what the binaries serve by default


# Counters whose labelled series appear only after a rare event (a dispatch failure, a reaper recovery, a
# skipped delivery, a failed best-effort publish): for these the live output must declare the family
# (# TYPE line); every other dashboard metric must have samples after the burst.
EVENT_ONLY = {"scheduler_dispatch_errors", "reaper_recovered_jobs", "executor_skipped_deliveries", "bus_publish_errors"}


@dataclass
class Stack:
    api: str
    prometheus: str
    metrics_ports: dict[str, int]
    tenant: str

    def prometheus_query(self, expr: str) -> dict[str, Any]:
        url = f"{self.prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                body: dict[str, Any] = json.load(response)
        except urllib.error.HTTPError as exc:  # 400 on a bad expression: return Prometheus' own error
            body = json.load(exc)
        return body


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    run_id = uuid.uuid4().hex[:10]
    root = tmp_path_factory.mktemp("stack")
    api_port = free_port()
    env = stack_env(root, run_id, api_port)
    # Prometheus keeps its pid file, log, config and data in this test's folder; the servers stay where they are.
    prom_env = {**env, "JOBSCHED_RUN_DIR": str(root / "prometheus"), "PROMETHEUS_PORT": str(free_port())}
    up = script("stack.sh", "up", env)
    try:
        assert up.returncode == 0, f"stack.sh up failed:\n{up.stderr[-3000:]}\n{logs_tail(root / 'stack')}"
        targets = script("stack.sh", "targets", env).stdout.split("\n")
        ports = {line.split()[2]: int(line.split()[1].rsplit(":", 1)[1]) for line in targets if line.strip()}
        prom = script("prometheus.sh", "start", prom_env)
        assert prom.returncode == 0, f"prometheus.sh start failed:\n{prom.stderr[-3000:]}"
        yield Stack(
            api=f"http://127.0.0.1:{api_port}",
            prometheus=f"http://127.0.0.1:{prom_env['PROMETHEUS_PORT']}",
            metrics_ports=ports,
            tenant=f"e2e-{run_id}",
        )
    finally:
        script("prometheus.sh", "stop", prom_env)
        drop_database(script("servers.sh", "env", env).stdout, env["MONGO_DB"])
        down = script("stack.sh", "down", env)
        assert down.returncode == 0, down.stderr


def post_job(stack: Stack, n: int, job_type: str, payload: dict[str, Any], max_attempts: int = 3) -> str:
    body = {
        "idempotencyKey": f"{stack.tenant}-{n}",
        "tenantId": stack.tenant,
        "jobType": job_type,
        "payload": payload,
        "scheduledAt": datetime.now(UTC).isoformat(),
        "maxAttempts": max_attempts,
    }
    request = urllib.request.Request(
        f"{stack.api}/jobs", json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 201
        job_id: str = json.load(response)["id"]
    return job_id


def job_statuses(stack: Stack) -> list[str]:
    url = f"{stack.api}/jobs?" + urllib.parse.urlencode({"tenantId": stack.tenant, "limit": 5000})
    with urllib.request.urlopen(url, timeout=10) as response:
        return [job["status"] for job in json.load(response)]


def live_metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text: str = response.read().decode()
    return text


def total(stack: Stack, expr: str) -> float:
    body = stack.prometheus_query(expr)
    assert body["status"] == "success", body
    return sum(float(series["value"][1]) for series in body["data"]["result"])


def eventually(stack: Stack, expr: str, ok: Callable[[float], bool], what: str, timeout: float = 30) -> None:
    """Wait until Prometheus' value of `expr` (summed over series) satisfies `ok`; report the last value."""
    last: list[float] = []

    def check() -> bool:
        last.append(total(stack, expr))
        return ok(last[-1])

    try:
        wait_until(check, timeout, what, interval=0.25)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: last {expr} = {last[-1:]}") from None


def test_prometheus_sees_the_burst_and_the_dashboard_metrics_exist(stack: Stack) -> None:
    burst: list[tuple[str, dict[str, Any], int]] = [
        *[("noop", {}, 3)] * 20,
        *[("log-message", {"message": "burst"}, 3)] * 10,
        *[("slow", {"sleepMs": 50}, 3)] * 10,
        *[("flaky", {"failRate": 0}, 3)] * 5,
        *[("flaky", {"failRate": 1}, 1)] * 5,  # one attempt, fails: straight to the DLQ
    ]
    assert {job_type for job_type, _, _ in burst} == set(BUILTIN_TYPES.names())
    for n, (job_type, payload, max_attempts) in enumerate(burst):
        post_job(stack, n, job_type, payload, max_attempts)
    expected = sorted(["completed"] * 45 + ["dlq"] * 5)
    try:
        wait_until(lambda: sorted(job_statuses(stack)) == expected, 60, "50 jobs completed or dlq", interval=0.2)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {collections.Counter(job_statuses(stack))}") from None

    # Prometheus has scraped every process; the executors' throughput (at least one attempt per job, every
    # type), the DLQ, the scheduler's ticks and one leader. Waits, not one-shot reads: under load a scrape can
    # time out (1 s), and Prometheus then marks that target's series stale until the next one succeeds.
    targets = len(stack.metrics_ports)
    eventually(stack, "count(up == 1)", lambda v: v == targets, f"all {targets} scrape targets up")
    eventually(stack, "sum(executor_jobs_processed_total)", lambda v: v >= len(burst), "an attempt per job")
    types = len(BUILTIN_TYPES.names())
    eventually(stack, "count(sum by (job_type) (executor_jobs_processed_total) > 0)", lambda v: v == types, "each type")
    eventually(stack, "sum(executor_dead_lettered_total)", lambda v: v == 5, "5 dead-lettered")
    eventually(stack, "sum(scheduler_tick_duration_seconds_count)", lambda v: v > 0, "scheduler ticks")
    eventually(stack, "sum(scheduler_is_leader)", lambda v: v == 1, "exactly one leader")

    # Every dashboard expression is valid PromQL for the real engine.
    for expr in dashboard_expressions(load_json(DASHBOARD_FILE)):
        body = stack.prometheus_query(expr)
        assert body["status"] == "success", f"{expr}: {body.get('error')}"

    # Every metric the dashboard queries is in the live output of the processes that produce it.
    outputs = {name: live_metrics(port) for name, port in stack.metrics_ports.items()}
    samples = {line.split("{")[0].split(" ")[0] for text in outputs.values() for line in text.splitlines()}
    declared = {line.split()[2] for text in outputs.values() for line in text.splitlines() if line.startswith("# TYPE")}
    exposed = exposed_metric_names()
    for metric in sorted(dashboard_metric_names(load_json(DASHBOARD_FILE))):
        family = exposed[metric]
        if family in EVENT_ONLY:
            assert family in declared or metric in declared, f"{metric}: family not declared in any /metrics"
        else:
            assert metric in samples, f"{metric}: no sample in any process's /metrics"
