"""`peers-celery`: the distributed stack against Celery 5 with a Redis broker (loadtest/celery_peer.py), each
part measured on both sides back to back in the same run.

- drain: N due noop jobs pending → completed through a scheduler and a noop executor on MongoDB/Kafka (the
  `drain` measurement) vs N no-op Celery tasks sent first and run by a worker started afterwards. CPU per job:
  the machine's, and each side's own processes' (jobsched's scheduler + executor; Celery's worker, with
  redis-server apart as `broker`).
- lateness: jobs due at RATE per second over WINDOW seconds, scheduled ahead (the `lateness` measurement:
  first start - scheduledAt) vs Celery tasks sent with `apply_async(eta=...)` (start - eta).
Targets: jobsched's own CPU per job <= 0.6 ms at the drain; lateness p99 <= 25 ms with every job started."""

from __future__ import annotations

import argparse
from typing import Any

from loadtest.benchkit import Scenario, envelope, ratio, server_setting, store_kind, target
from loadtest.celery_peer import add_celery_arguments, measure_celery_drain, measure_celery_timed
from loadtest.scenarios.drain import measure_drain
from loadtest.scenarios.lateness import measure_lateness

TARGET_CPU_MS_PER_JOB = 0.6
TARGET_LATENESS_P99_MS = 25.0
PARTS = ("drain", "lateness")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=20_000, help="drain: due jobs (default 20000)")
    parser.add_argument("--batch", type=int, default=500, help="drain: jobsched claim batch (default 500)")
    parser.add_argument("--rate", type=float, default=200.0, help="lateness: jobs due per second (default 200)")
    parser.add_argument("--window", type=float, default=60.0, help="lateness: seconds of due jobs (default 60)")
    parser.add_argument("--settle", type=float, default=10.0, help="lateness: seconds allowed after the window")
    add_celery_arguments(parser)
    parser.add_argument(
        "--parts", default=",".join(PARTS), help=f"which parts, comma-separated (default {','.join(PARTS)})"
    )
    parser.add_argument("--peer-seconds", type=float, default=600.0, help="time box of the Celery drain")


def run(args: argparse.Namespace) -> dict[str, Any]:
    uri, brokers = server_setting("MONGO_URI"), server_setting("KAFKA_BROKERS")
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise SystemExit(f"unknown parts {sorted(unknown)}; known: {', '.join(PARTS)}")
    ours: dict[str, Any] = {}
    peer: dict[str, Any] = {}
    ratios: dict[str, float] = {}
    targets: dict[str, Any] = {}
    if "drain" in parts:
        drained = measure_drain(uri, brokers, args.jobs, {"CLAIM_BATCH": str(args.batch)}, None)
        celery_run, times = measure_celery_drain(args.jobs, args.pool, args.concurrency, args.peer_seconds)
        ours["drain"], peer["drain"] = drained.figures(), {**celery_run.figures(), **times}
        ratios["drain"] = ratio(True, drained.rate, celery_run.rate)
        cpu_ms = drained.cpu_ms_per_job.get("own_processes", float("nan"))
        targets["drain_cpu_ms_per_job"] = target(
            f"scheduler + executor CPU per job <= {TARGET_CPU_MS_PER_JOB} ms", cpu_ms, cpu_ms <= TARGET_CPU_MS_PER_JOB
        )
        for side in (drained, celery_run):
            cpu = ", ".join(f"{where} {ms} ms" for where, ms in side.cpu_ms_per_job.items())
            print(f"drain  {side.label:<70} {side.rate:9.1f} jobs/s  CPU per job: {cpu}")
        print(f"drain ratio (jobsched / Celery): {ratios['drain']:.2f}x")
    if "lateness" in parts:
        late = measure_lateness(uri, brokers, args.rate, args.window, args.settle, {})
        celery_late = measure_celery_timed(args.rate, args.window, args.settle, args.pool, args.concurrency, ahead=True)
        ours["lateness"], peer["lateness"] = late, celery_late
        p99 = late["lateness_ms"]["p99"]
        ratios["lateness_p99"] = ratio(False, p99, celery_late["lateness_ms"]["p99"])
        every = late["censored"] == 0
        targets["lateness_p99"] = target(
            f"lateness p99 <= {TARGET_LATENESS_P99_MS:g} ms at {args.rate:g} jobs/s, every job started",
            p99,
            p99 <= TARGET_LATENESS_P99_MS and every,
        )
        for figures in (late, celery_late):
            q = figures["lateness_ms"]
            print(
                f"lateness {figures['setting']:<68} p50 {q['p50']:7.1f} p95 {q['p95']:7.1f} p99 {q['p99']:7.1f} "
                f"max {q['max']:7.1f} ms ({figures['censored']} not started)"
            )
        print(f"lateness p99 ratio (Celery / jobsched): {ratios['lateness_p99']:.2f}x")
    for name, figure in targets.items():
        print(f"target {name}: {figure['target']}: {figure['value']} {'met' if figure['met'] else 'MISSED'}")
    headline = ratios.get("drain", ratios.get("lateness_p99", float("nan")))
    return envelope("peers-celery", ours, peer, headline, store_kind(uri), ratios=ratios, targets=targets, parts=parts)


SCENARIO = Scenario(
    "peers-celery", "the distributed drain and lateness vs Celery 5 on Redis, with CPU per job", add_arguments, run
)
