"""`lateness`: jobs scheduled uniformly into the future at a steady RATE per second over a WINDOW (created up
front, in time order, once a warm-up job has gone through), run by real processes (a scheduler and a noop
executor on FerretDB/Kafka). Lateness = the first attempt's startedAt - scheduledAt (from the job's attempt
history), p50/p95/p99/max in ms, as configured vs the reference setting (batch 20 single claims, tick
500 ms, one handler at a time). A job not started when the run ends (WINDOW + SETTLE after the first due
time) counts with its lateness so far, a lower bound. Target: p99 <= 250 ms at 200 jobs/s."""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from pymongo import MongoClient

from loadtest.benchkit import (
    REFERENCE_ENV,
    Figures,
    Scenario,
    envelope,
    first_starts,
    ratio,
    scratch_database,
    seed_due_jobs,
    seed_jobs,
    server_setting,
    setting_label,
    store_kind,
    target,
)
from loadtest.procs import count_until, pipeline, wait_until
from loadtest.stats import summary
from shared.model import utc_now

TARGET_P99_MS = 250.0
KEY_PREFIX = "late"
LEAD_S = 1.0  # between the end of the warm-up and the first due job


def lateness_ms(
    scheduled: Mapping[str, datetime], started: Mapping[str, datetime], ended: datetime
) -> tuple[list[float], int]:
    """Per job: first start - scheduledAt in ms; a job with no start yet counts `ended` - scheduledAt (a lower
    bound). Returns the values and how many were such lower bounds."""
    values = []
    censored = 0
    for job_id, due in scheduled.items():
        start = started.get(job_id)
        if start is None:
            censored += 1
            start = ended
        values.append((start - due).total_seconds() * 1000)
    return values, censored


def lateness_figures(rate: float, window_s: float, total: int, values: list[float], censored: int) -> Figures:
    """What every lateness measurement reports first."""
    return {
        "rate": rate,
        "window_s": window_s,
        "jobs": total,
        "started": total - censored,
        "censored": censored,
        "lateness_ms": summary(values),
    }


def gaps_ms(earlier: Mapping[str, datetime], later: Mapping[str, datetime]) -> list[float]:
    """later - earlier in ms for the jobs that have both."""
    return [(later[k] - at).total_seconds() * 1000 for k, at in earlier.items() if k in later]


def measure_lateness(
    uri: str, brokers: str, rate: float, window_s: float, settle_s: float, env: dict[str, str]
) -> Figures:
    total = int(rate * window_s)
    seed_lag_ms = [0.0]

    def check_lag(first_due: datetime) -> None:  # a chunk inserted after its first job was due skews the result
        seed_lag_ms[0] = max(seed_lag_ms[0], (utc_now() - first_due).total_seconds() * 1000)

    with scratch_database(uri) as database, pipeline(uri, brokers, database, env) as pipe:
        seed_due_jobs(uri, database, 1, "noop")  # warm-up: the leader is elected and the executor consumes
        wait_until(lambda: pipe.completed() >= 1, 120, "the warm-up job to complete")
        first_due = utc_now() + timedelta(seconds=LEAD_S)
        seed_jobs(
            uri,
            database,
            total,
            lambda n: first_due + timedelta(seconds=n / rate),
            key_prefix=KEY_PREFIX,
            chunk=max(1, int(rate)),
            before_chunk=check_lag,
        )
        time_box_s = (first_due - utc_now()).total_seconds() + window_s + settle_s
        count_until(pipe.completed, total + 1, time.monotonic(), time_box_s)
        ended = utc_now()
        scheduled, queued, started = read_times(uri, database)
    values, censored = lateness_ms(scheduled, started, ended)
    return {
        **lateness_figures(rate, window_s, total, values, censored),
        # where the lateness comes from: waiting for the tick that claims the job (queuedAt is that tick's
        # clock; negative when the job was claimed ahead of its time, CLAIM_LOOKAHEAD), then claim + publish +
        # Kafka + the executor holding an early wake-up until the job's time and taking the attempt
        "due_to_claim_ms": summary(gaps_ms(scheduled, queued)),
        "claim_to_start_ms": summary(gaps_ms(queued, started)),
        "seed_lag_ms": round(seed_lag_ms[0], 1),
        "setting": setting_label(env),
    }


Times = dict[str, datetime]


def read_times(uri: str, database: str) -> tuple[Times, Times, Times]:
    """By job id, of the measured jobs: scheduledAt, queuedAt (if claimed), and the startedAt of the first
    attempt (if started)."""
    client: MongoClient[dict[str, Any]] = MongoClient(uri, tz_aware=True)
    try:
        db = client[database]
        measured = [
            d
            for d in db["jobs"].find({}, {"idempotencyKey": 1, "scheduledAt": 1, "queuedAt": 1})
            if d["idempotencyKey"].startswith(f"{KEY_PREFIX}-")
        ]
        scheduled = {str(d["_id"]): d["scheduledAt"] for d in measured}
        queued = {str(d["_id"]): d["queuedAt"] for d in measured if d.get("queuedAt") is not None}
        started = first_starts(db["jobs"], {"_id": {"$in": [d["_id"] for d in measured]}})
    finally:
        client.close()
    return scheduled, queued, started


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rate", type=float, default=200.0, help="jobs due per second (default 200)")
    parser.add_argument("--window", type=float, default=60.0, help="seconds over which jobs fall due (default 60)")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds allowed after the window (default 10)")
    parser.add_argument("--tick", help="SCHEDULER_TICK of the jobsched run (default: the product default)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    uri, brokers = server_setting("MONGO_URI"), server_setting("KAFKA_BROKERS")
    ours_env = {"SCHEDULER_TICK": args.tick} if args.tick else {}
    ours = measure_lateness(uri, brokers, args.rate, args.window, args.settle, ours_env)
    reference = measure_lateness(uri, brokers, args.rate, args.window, args.settle, REFERENCE_ENV)
    for figures in (ours, reference):
        late = figures["lateness_ms"]
        print(
            f"{figures['setting']:<60} lateness p50 {late['p50']:9.1f} p95 {late['p95']:9.1f} "
            f"p99 {late['p99']:9.1f} max {late['max']:9.1f} ms  ({figures['censored']} not started)"
        )
        wait, dispatch = figures["due_to_claim_ms"], figures["claim_to_start_ms"]
        print(
            f"{'':<60}   of which due → claimed (< 0: ahead) p50 {wait['p50']:.1f} p99 {wait['p99']:.1f} ms, "
            f"claimed → started p50 {dispatch['p50']:.1f} p99 {dispatch['p99']:.1f} ms"
        )
    p99 = ours["lateness_ms"]["p99"]
    value = ratio(False, p99, reference["lateness_ms"]["p99"])
    met = p99 <= TARGET_P99_MS
    print(f"ratio (baseline p99 / jobsched p99): {value:.1f}x; target p99 <= {TARGET_P99_MS:.0f} ms: {met}")
    targets = {"p99_le_250ms": target(f"lateness p99 <= {TARGET_P99_MS:.0f} ms at {args.rate:g} jobs/s", p99, met)}
    return envelope("lateness", ours, reference, value, store_kind(uri), targets=targets)


SCENARIO = Scenario("lateness", "start lateness of jobs due at a steady rate (p50/p95/p99 ms)", add_arguments, run)
