"""`failover`: two real scheduler processes on etcd (LEASE_TTL, default 10 s), Kafka and FerretDB. The leader
is stopped — kill -9, then SIGTERM, REPEAT times each (after each handover a fresh standby is started) — and
a due job is created right after: the time from the signal until that job is `queued` by the new leader
(checked on its scheduler_jobs_claimed_total). Reported p50/max of each, against the baseline of the lease
TTL (the worst case of a leader that does not resign) and the targets kill -9 <= 12 s, SIGTERM <= 1 s."""

from __future__ import annotations

import argparse
import signal
import time
from contextlib import ExitStack
from datetime import timedelta
from typing import Any

from jobsched.type_defaults import TypeDefaults
from loadtest.benchkit import Figures, Scenario, envelope, ratio, scratch_database, server_setting, store_kind, target
from loadtest.procs import Service, pipeline_env, wait_until
from loadtest.stats import percentile
from shared.backends import open_backend
from shared.model import Status, utc_now
from shared.store.base import JobStore, NewJob

TARGETS_S = {"kill9": 12.0, "sigterm": 1.0}
SIGNALS = {"kill9": signal.SIGKILL, "sigterm": signal.SIGTERM}


class Schedulers:
    """Scheduler processes sharing one election key, topics and database; each is stopped at the end."""

    def __init__(self, env: dict[str, str], stack: ExitStack) -> None:
        self._env = env
        self._stack = stack
        self._started = 0

    def start(self, leading: bool) -> Service:
        name = f"scheduler-{self._started}"
        self._started += 1
        service = Service("scheduler", {**self._env, "NODE_ID": name}, name=name)
        self._stack.callback(service.stop)
        wanted = 1 if leading else 0
        wait_until(lambda: service.metric("scheduler_is_leader") == wanted, 60, f"{name} to report is_leader={wanted}")
        return service


def hand_over(store: JobStore, leader: Service, standby: Service, signum: int, timeout_s: float) -> float:
    """Stop the leader with `signum`, create a due job: seconds until the standby has queued it."""
    claimed_before = standby.metric("scheduler_jobs_claimed_total")
    leader.signal(signum)
    stopped_at = time.monotonic()
    job = store.create(
        NewJob(
            idempotencyKey=f"failover-{stopped_at}",
            tenantId="bench",
            jobType="noop",
            scheduledAt=utc_now() - timedelta(seconds=1),
        )
    )

    def queued() -> bool:
        current = store.get(job.id)
        return current is not None and current.status is Status.QUEUED

    wait_until(queued, timeout_s, "the new leader to dispatch", interval_s=0.01)
    seconds = time.monotonic() - stopped_at
    leader.process.wait(60)
    # The claim's counter moves just after the job reads back as queued: wait for it, then insist on it.
    expected = (claimed_before or 0) + 1
    try:
        wait_until(lambda: standby.metric("scheduler_jobs_claimed_total") == expected, 10, "the claim counter")
    except TimeoutError:
        raise RuntimeError("the job after the handover was not dispatched by the new leader") from None
    return seconds


def measure_failover(uri: str, brokers: str, repeat: int, ttl_s: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {mode: [] for mode in SIGNALS}
    with scratch_database(uri) as database, ExitStack() as stack:
        backend = open_backend(uri, database=database)
        store = backend.jobs
        stack.callback(backend.close)
        # What is measured is the claim: no executor consumes the wake-ups, one is announced for the whole run
        # so that the schedulers claim `noop` (they claim the types of live executors only).
        now = utc_now()
        backend.job_types.announce("failover-bench", {"noop": TypeDefaults()}, now, now + timedelta(days=1))
        schedulers = Schedulers(pipeline_env(uri, brokers, database, {"LEASE_TTL": f"{ttl_s}s"}), stack)
        leader = schedulers.start(leading=True)
        standby = schedulers.start(leading=False)
        for mode, signum in SIGNALS.items():
            for n in range(repeat):
                seconds = hand_over(store, leader, standby, signum, timeout_s=3 * ttl_s + 30)
                times[mode].append(round(seconds, 3))
                print(f"{mode:<8} #{n + 1}: first dispatch by the new leader after {seconds:6.2f}s")
                leader, standby = standby, schedulers.start(leading=False)
    return times


def spread(values: list[float]) -> Figures:
    ordered = sorted(values)
    return {"p50": percentile(ordered, 50), "max": ordered[-1], "runs": values}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeat", type=int, default=10, help="handovers of each kind (default 10)")
    parser.add_argument("--lease-ttl", type=int, default=10, help="LEASE_TTL in seconds (default 10)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    uri, brokers = server_setting("MONGO_URI"), server_setting("KAFKA_BROKERS")
    times = measure_failover(uri, brokers, args.repeat, args.lease_ttl)
    ours: Figures = {f"{mode}_s": spread(values) for mode, values in times.items()}
    ours["lease_ttl_s"] = args.lease_ttl
    baseline: Figures = {f"{mode}_s": float(args.lease_ttl) for mode in SIGNALS}
    baseline["setting"] = "lease TTL: the worst case of a leader that does not resign"
    ratios = {mode: ratio(False, ours[f"{mode}_s"]["p50"], args.lease_ttl) for mode in SIGNALS}
    targets = {}
    for mode, limit in TARGETS_S.items():
        figures = ours[f"{mode}_s"]
        met = figures["max"] <= limit
        targets[f"{mode}_max_le_{limit:g}s"] = target(f"{mode} handover max <= {limit:g} s", figures["max"], met)
        print(
            f"{mode:<8} p50 {figures['p50']:6.2f}s  max {figures['max']:6.2f}s  "
            f"(baseline {args.lease_ttl}s, target <= {limit:g}s: {met})"
        )
    print(f"ratio (lease TTL / jobsched p50): kill -9 {ratios['kill9']}x, SIGTERM {ratios['sigterm']}x")
    return envelope("failover", ours, baseline, ratios["sigterm"], store_kind(uri), ratios=ratios, targets=targets)


SCENARIO = Scenario("failover", "leader handover time after kill -9 and SIGTERM (s)", add_arguments, run)
