"""`soak`: the distributed stack under a steady load for hours, counting what must never happen.

Processes on a fresh database of MONGO_URI: an API, SCHEDULERS schedulers (one leads, through etcd; the API
nudges each), EXECUTORS executors of the soak's job type (loadtest/soak/handlers.py, loaded as a plug-in), and a
reaper with retention on (finished jobs deleted RETAIN seconds after they finished). For MINUTES, RATE one-off
jobs a second through POST /jobs, open loop (loadtest/soak/load.py: 70% due now, 15% due within 10 s, 10% failing
twice then succeeding, 2% failing until dead-lettered, 3% cancelled after creation), and a template firing
every second. Every job is followed in the store until it is final (loadtest/soak/tracking.py); after the load
the template is cancelled and the last jobs get SETTLE seconds at most.

Per WINDOW minutes and in total: created/s achieved, create latency and start lateness (the first attempt's
start - scheduledAt) p50/p99, jobs created, completed, dead-lettered, cancelled, API errors, the store servers'
log lines (PostgreSQL backends terminated by a signal, corruption errors, FerretDB errors:
loadtest/server_logs.py, from --server-logs), the longest operation the store was running on the soak's
database (currentOp) and the processes' memory. Targets: no crash, no corruption error, no operation running
for 2 minutes, no job lost (not final after the settle, or gone before it was final), every job ending as its
kind must, no upward drift of the p99s (the last full window's p99 <= max(2 x the first's, the first's + 50 ms)),
the rate sustained (created >= 95% of RATE). With --json the file is rewritten as each window is reported, so a
run that is killed keeps its windows.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import math
import os
import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2 as httpx
from pymongo.errors import PyMongoError

from loadtest.benchkit import Figures, Scenario, envelope, ratio, scratch_database, server_setting, store_kind, target
from loadtest.cpu import process_rss_mb
from loadtest.procs import Stack, distributed_stack, pipeline_env
from loadtest.scenarios.due_now import warm_up
from loadtest.server_logs import ServerLogs
from loadtest.soak.handlers import SOAK_TYPE
from loadtest.soak.load import REQUEST_TIMEOUT_S, Load, cancel_template, create_template
from loadtest.soak.tracking import POLL_S, StoreReads, Tracker, pause, poll, watch
from loadtest.soak.windows import DRIFT_RULE, HEADER, Window, Windows, no_drift, row
from shared.local_stack import run_dir
from shared.model import utc_now

STUCK_OP_S = 120  # an operation of the soak's (a find, a claim, a delete) running this long is stuck
REPORT_GRACE_S = 2 * POLL_S + 1  # a window is reported once the store's polls have seen its last events
SUSTAINED_SHARE = 0.95
SETTLE_CHECK_S = 0.5
CONNECTIONS = 64
WARM_UP_S = 180.0


@dataclass
class SoakRun:
    args: argparse.Namespace
    stack: Stack
    store: StoreReads
    logs: ServerLogs
    store_name: str
    windows: Windows
    tracker: Tracker = field(init=False)
    reported: list[Window] = field(default_factory=list)
    exited: list[dict[str, Any]] = field(default_factory=list)
    load_ended: datetime | None = None
    ended: datetime | None = None
    settle: dict[str, Any] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    stop_load: asyncio.Event = field(default_factory=asyncio.Event)
    api_error_samples: dict[str, str] = field(default_factory=dict)
    stuck_ops: dict[str, str] = field(default_factory=dict)  # by opid: what it was, how long it had run

    def __post_init__(self) -> None:
        self.tracker = Tracker(self.windows, self.args.retain_seconds)

    async def run(self) -> dict[str, Any]:
        """The load, the settle and the last read, while the store is watched and the windows reported (a failure
        of either ends the run at once, through the task group)."""
        limits = httpx.Limits(max_connections=CONNECTIONS, max_keepalive_connections=CONNECTIONS)
        async with (
            httpx.AsyncClient(base_url=self.stack.base_url, timeout=REQUEST_TIMEOUT_S, limits=limits) as client,
            asyncio.TaskGroup() as tasks,
        ):
            stop_watching, stop_reporting = asyncio.Event(), asyncio.Event()
            watcher = tasks.create_task(watch(self.store, self.tracker, stop_watching))
            tasks.create_task(self.report_windows(stop_reporting))
            await self.load_and_settle(client)
            stop_watching.set()
            await watcher
            await poll(self.store, self.tracker, limit=None)  # every job left, whatever the reads' budget
            self.ended = utc_now()
            stop_reporting.set()
        self.counters = {
            "retention_deleted": self.stack.metric_total("reaper", "retention_deleted_jobs_total"),
            "dead_lettered": self.stack.metric_total("executor", "executor_dead_lettered_total"),
            "template_runs_spawned": self.stack.metric_total("scheduler", "scheduler_cron_runs_spawned_total"),
            "leader_transitions": self.stack.metric_total("scheduler", "scheduler_leader_transitions_total"),
        }
        result = self.result(complete=True)
        if self.args.json:  # now: stopping the processes and dropping the database may take minutes
            write_atomically(Path(self.args.json), result)
        return result

    async def load_and_settle(self, client: httpx.AsyncClient) -> None:
        run_id = uuid.uuid4().hex[:8]
        self.tracker.template_id = await create_template(client, run_id)
        print(HEADER, flush=True)
        load = Load(client, self.tracker, self.windows, run_id)
        self.api_error_samples = load.error_samples
        await load.send(self.args.rate, self.args.minutes * 60, self.stop_load)
        self.load_ended = utc_now()
        print(f"load ended at {self.load_ended:%H:%M:%S}; the last jobs get {self.args.settle_seconds:g}s", flush=True)
        self.settle["template"] = await cancel_template(client, self.tracker.template_id)
        await self.wait_for_last_jobs()

    async def wait_for_last_jobs(self) -> None:
        began = utc_now()
        for _ in range(math.ceil(self.args.settle_seconds / SETTLE_CHECK_S)):
            if not self.tracker.outstanding(utc_now()):
                break
            await asyncio.sleep(SETTLE_CHECK_S)
        self.settle["seconds"] = round((utc_now() - began).total_seconds(), 1)

    async def report_windows(self, stop: asyncio.Event) -> None:
        """Report each window REPORT_GRACE_S after it ends; at `stop`, the rest (the last one cut at the end)."""
        while True:
            stopping = stop.is_set()
            now = utc_now()
            while True:
                window = self.windows.number(len(self.reported))
                if not (window.end + timedelta(seconds=REPORT_GRACE_S) <= now or (stopping and window.start < now)):
                    break
                self.report(window, until=now if stopping else None, operations=await self.operations())
            if stopping:
                return
            await pause(stop, 1.0)

    async def operations(self) -> list[tuple[str, float, str]] | None:
        try:
            return await asyncio.to_thread(self.store.operations)
        except PyMongoError:
            return None

    def report(self, window: Window, until: datetime | None, operations: list[tuple[str, float, str]] | None) -> None:
        window.server.update(self.logs.read())
        if operations is not None:
            window.longest_op_s = max((seconds for _, seconds, _ in operations), default=0.0)
            for opid, seconds, what in operations:
                if seconds >= STUCK_OP_S:
                    self.stuck_ops[opid] = f"{what}: running {seconds:.0f}s"
        window.rss_mb = {s.name: rss for s in self.stack.services if (rss := process_rss_mb(s.process.pid))}
        window.loadavg_1m = round(os.getloadavg()[0], 2)
        for service in self.stack.services:
            code = service.process.poll()
            if code is not None and service.name not in {e["name"] for e in self.exited}:
                self.exited.append({"name": service.name, "code": code, "log": str(service.log_path)})
                self.stop_load.set()  # the soak is over: report what it found
                print(f"{service.name} exited with {code} (log {service.log_path}): load stopped", flush=True)
        self.reported.append(window)
        print(row(window.figures(until)), flush=True)
        if self.args.json:
            write_atomically(Path(self.args.json), self.result(complete=False))

    def full_windows(self) -> list[Window]:
        """The reported windows that lie wholly in the load."""
        load_end = self.load_ended or utc_now()
        return [w for w in self.reported if w.end <= load_end]

    def result(self, complete: bool) -> dict[str, Any]:
        end = self.ended or utc_now()
        total = self.windows.combined()
        totals = total.figures(until=end)
        load_s = ((self.load_ended or end) - self.windows.start).total_seconds()
        achieved = round(total.created / load_s, 1) if load_s > 0 else 0.0
        outstanding = self.tracker.outstanding(end)
        lost = {
            "not_final": outstanding,
            "not_due_at_end": len(self.tracker.open) - outstanding,
            "vanished_before_final": {"count": self.tracker.vanished.count, "samples": self.tracker.vanished.samples},
            "vanished_unverified": {"count": self.tracker.unverified.count, "samples": self.tracker.unverified.samples},
            "missed_by_a_read": {"count": self.tracker.missed.count, "samples": self.tracker.missed.samples},
            "unexpected_outcomes": {"count": self.tracker.unexpected.count, "samples": self.tracker.unexpected.samples},
            "start_missing": self.tracker.start_missing,
        }
        full = self.full_windows()
        first, last = (full[0].figures(), full[-1].figures()) if full else ({}, {})
        ours: Figures = {
            "setting": setting(self.args),
            "rate": self.args.rate,
            "achieved_rate": achieved,
            "load_s": round(load_s, 1),
            **{k: totals[k] for k in ("sent", "created", "completed", "dlq", "cancelled", "api_errors")},
            "template_runs": self.tracker.runs,
            "create_ms": totals["create_ms"],
            "lateness_ms": totals["lateness_ms"],
            "run_lateness_ms": totals["run_lateness_ms"],
            "lost": outstanding + self.tracker.vanished.count,
            "last_full_window": last,
        }
        baseline: Figures = {"setting": "the soak's first full window", **first}
        late = [w.get("lateness_ms") or {} for w in (first, last)]
        headline = ratio(False, late[1].get("p99", float("nan")), late[0].get("p99", float("nan")))
        targets = soak_targets(self.args, self.logs, ours, self.tracker, self.stuck_ops, (first, last), len(full))
        return envelope(
            "soak",
            ours,
            baseline,
            headline,
            self.store_name,
            complete=complete,
            targets=targets,
            verdict={"clean": all(t["met"] for t in targets.values()), "drift_rule": DRIFT_RULE},
            windows=[w.figures(until=end) for w in self.reported],
            lost_jobs=lost,
            server_logs=self.logs.figures(),
            store_reads={
                "poll_s": POLL_S,
                "longest_poll_s": round(self.tracker.longest_poll_s, 2),
                "polls_at_their_budget": self.tracker.full_polls,
            },
            settle=self.settle,
            counters=self.counters,
            processes_exited=self.exited,
            api_error_samples=self.api_error_samples,
            stuck_operations=self.stuck_ops,
        )


def setting(args: argparse.Namespace) -> str:
    return (
        f"{args.rate:g} jobs/s for {args.minutes:g} min, {args.schedulers} schedulers, {args.executors} executors, "
        f"retention {args.retain_seconds:g}s (reaper every {args.reaper_seconds:g}s)"
    )


def soak_targets(
    args: argparse.Namespace,
    logs: ServerLogs,
    ours: Figures,
    tracker: Tracker,
    stuck_ops: dict[str, str],
    windows: tuple[Figures, Figures],
    full: int,
) -> dict[str, Figures]:
    """The issue's targets; `windows`: the first and the last full window, of `full`."""
    targets: dict[str, Figures] = {}
    for category, description in (("crashes", "no PostgreSQL backend crash"), ("corruption", "no corruption error")):
        found = logs.findings[category].count
        targets[f"no_{category}"] = (
            target(description, found, found == 0)
            if logs.known(category)
            else unmeasured(description, "the PostgreSQL log was not found")
        )
    description = "every job final after the settle, none gone before"
    unverified = tracker.unverified.count
    targets["no_lost_job"] = (
        target(description, ours["lost"], ours["lost"] == 0)
        if not unverified
        else unmeasured(description, f"{unverified} gone too long after they were last seen not final to be sure")
    )
    stuck = len(stuck_ops)
    targets["no_stuck_operation"] = target(
        f"no operation on the soak's database running {STUCK_OP_S}s or longer", stuck, stuck == 0
    )
    missed = tracker.missed.count
    targets["no_missed_read"] = target("no job left out of the answer to a read of its id", missed, missed == 0)
    unexpected = tracker.unexpected.count
    targets["outcomes_as_expected"] = target(
        "every job ended as its kind must (completed, dead-lettered, cancelled)", unexpected, unexpected == 0
    )
    for figure in ("create_ms", "lateness_ms"):
        description = f"{figure.removesuffix('_ms')} p99: {DRIFT_RULE}"
        first, last = ((w.get(figure) or {}).get("p99") for w in windows)
        if full < 2 or first is None or last is None:
            targets[f"{figure}_no_drift"] = unmeasured(description, f"{full} full windows: 2 are needed")
        else:
            targets[f"{figure}_no_drift"] = target(description, last, no_drift(first, last))
    share = ours["achieved_rate"] / args.rate
    targets["rate_sustained"] = target(
        f"created/s >= {SUSTAINED_SHARE:.0%} of {args.rate:g}", ours["achieved_rate"], share >= SUSTAINED_SHARE
    )
    return targets


def unmeasured(description: str, why: str) -> Figures:
    """A target that could not be checked: not met, since nothing says it was."""
    return {"target": description, "value": None, "met": False, "note": why}


def write_atomically(path: Path, result: dict[str, Any]) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(result, indent=2))
    partial.replace(path)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rate", type=float, default=200.0, help="one-off jobs created per second (default 200)")
    parser.add_argument("--minutes", type=float, default=120.0, help="minutes of load (default 120)")
    parser.add_argument("--window-minutes", type=float, default=10.0, help="minutes per reported window (default 10)")
    parser.add_argument(
        "--settle-seconds", type=float, default=120.0, help="at most this long for the last jobs to end (default 120)"
    )
    parser.add_argument("--schedulers", type=int, default=2, help="scheduler processes (default 2)")
    parser.add_argument("--executors", type=int, default=2, help="executor processes (default 2)")
    parser.add_argument(
        "--retain-seconds", type=float, default=60.0, help="RETAIN_COMPLETED/CANCELLED/DLQ (default 60)"
    )
    parser.add_argument("--reaper-seconds", type=float, default=10.0, help="REAPER_INTERVAL (default 10)")
    default_logs = run_dir(os.environ)
    parser.add_argument(
        "--server-logs",
        default=str(default_logs),
        help=f"the folder of documentdb.log and ferretdb.log (default {default_logs})",
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    uri, brokers = server_setting("MONGO_URI"), server_setting("KAFKA_BROKERS")
    logs = ServerLogs(Path(args.server_logs))  # from here on: the stack's start is part of the soak
    store_name = store_kind(uri)
    retain = f"{args.retain_seconds:g}s"
    settings = {
        "RETAIN_COMPLETED": retain,
        "RETAIN_CANCELLED": retain,
        "RETAIN_DLQ": retain,
        "REAPER_INTERVAL": f"{args.reaper_seconds:g}s",
        "JOBSCHED_HANDLERS": "loadtest.soak.handlers",
    }
    with stopped_as_by_ctrl_c(), scratch_database(uri) as database:
        env = pipeline_env(uri, brokers, database, settings)
        executors = [SOAK_TYPE] * args.executors
        with distributed_stack(env, schedulers=args.schedulers, executors=executors, reaper=True) as stack:
            warm_up_every_executor(stack)
            store = StoreReads(uri, database)
            try:
                soak = SoakRun(args, stack, store, logs, store_name, Windows(utc_now(), args.window_minutes * 60))
                result = asyncio.run(soak.run())
            finally:
                store.close()
            print_summary(result)
            print("stopping the processes and dropping the database", flush=True)
    return result


@contextmanager
def stopped_as_by_ctrl_c() -> Iterator[None]:
    """SIGTERM (`timeout`, a supervisor) ends the soak as Ctrl-C does: its processes stopped and its database
    dropped, the windows reported so far kept in the JSON. SIGUSR1 prints every thread's stack, for a run that
    seems stuck."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        yield
    finally:
        faulthandler.unregister(signal.SIGUSR1)
        signal.signal(signal.SIGTERM, previous)


def warm_up_every_executor(stack: Stack) -> None:
    """Jobs through the stack until every executor has run one: the broker holds a new consumer group's first
    assignment a few seconds for more members to join, and the executor that joins later takes its partitions
    away from the first; the jobs on them would wait, making the first window late by seconds."""
    deadline = time.monotonic() + WARM_UP_S
    executors = stack.named("executor")
    while not all(e.metric("executor_jobs_processed_total") for e in executors):
        if time.monotonic() > deadline:
            raise TimeoutError(f"not every executor ran a warm-up job within {WARM_UP_S:g}s")
        warm_up(stack.base_url, SOAK_TYPE)


def print_summary(result: dict[str, Any]) -> None:
    ours, lost, logs = result["jobsched"], result["lost_jobs"], result["server_logs"]
    create, late = ours["create_ms"] or {}, ours["lateness_ms"] or {}
    print(f"\n{ours['setting']}; store {result['store']}")
    print(
        f"achieved {ours['achieved_rate']} created/s ({ours['sent']} sent, {ours['created']} created, API errors "
        f"{ours['api_errors'] or 'none'}); create p50 {create.get('p50')} p99 {create.get('p99')} ms; lateness "
        f"p50 {late.get('p50')} p99 {late.get('p99')} ms"
    )
    print(
        f"jobs: {ours['completed']} completed, {ours['dlq']} dead-lettered, {ours['cancelled']} cancelled "
        f"({ours['template_runs']} template runs among them); not final after {result['settle'].get('seconds')} s "
        f"of settle: {lost['not_final']}; gone before final: {lost['vanished_before_final']['count']} (not "
        f"verifiable: {lost['vanished_unverified']['count']}); "
        f"unexpected outcomes: {lost['unexpected_outcomes']['count']}"
    )
    for opid, what in result["stuck_operations"].items():
        print(f"    stuck operation {opid}: {what}")
    for kind, answer in result["api_error_samples"].items():
        print(f"    {kind}: {answer}")
    for kind in ("vanished_before_final", "vanished_unverified", "missed_by_a_read", "unexpected_outcomes"):
        for sample in lost[kind]["samples"]:
            print(f"    {kind}: {sample}")
    for category in ("crashes", "corruption", "ferretdb_errors"):
        found = logs[category]
        print(f"{category}: {'log not found' if found is None else found['count']}")
        for sample in (found or {}).get("samples", []):
            print(f"    {sample}")
    print(f"counters: {result['counters']}; the soak's store reads: {result['store_reads']}")
    for name, figure in result["targets"].items():
        print(f"target {name}: {figure['target']}: {figure['value']} {'met' if figure['met'] else 'MISSED'}")
    print(f"verdict: {'clean' if result['verdict']['clean'] else 'NOT clean'}")


SCENARIO = Scenario(
    "soak",
    "the distributed stack under a steady load for hours: crashes, corruption, lost jobs, p99 drift",
    add_arguments,
    run,
)
