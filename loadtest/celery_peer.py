"""Celery 5 with a Redis broker, the peer a Python team would otherwise run, measured the way the jobsched
scenarios measure: a throw-away redis-server (Debian's package, installed by deployments/local/redis.sh) on a
free loopback port without persistence, and a Celery worker as a process of its own
(`celery -A loadtest.celery_app worker`, the pool and concurrency given), both stopped afterwards.

- drain: N no-op tasks sent first (not timed, as jobsched's jobs are seeded), then the worker starts; timed
  from the worker's start until every task has run; CPU per job of the worker (with its pool processes) and
  of redis-server apart, and of the machine.
- timed runs: tasks at a steady rate over a window, each recording when it started: with `eta` (sent ahead,
  due at its eta: lateness = start - eta) or due now (sent at its time: start - send).
Tasks count their runs with an INCR on the same Redis (there is no result backend to read)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

import celery
import redis

from loadtest import celery_app
from loadtest.benchkit import Figures, Run
from loadtest.cpu import CpuWindow, process_cpu_s, process_tree_cpu_s
from loadtest.procs import LOG_DIR, REPO_ROOT, count_until, free_port, wait_until
from loadtest.stats import summary

REDIS_SCRIPT = REPO_ROOT / "deployments" / "local" / "redis.sh"
LEAD_S = 1.0  # between the end of the warm-up and the first due task


@dataclass(frozen=True)
class Broker:
    url: str
    process: subprocess.Popen[bytes]

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url)


def redis_binary() -> str:
    """redis-server's path, installed by the project's script if missing."""
    found = subprocess.run(["bash", str(REDIS_SCRIPT), "path"], capture_output=True, text=True, check=True)
    return found.stdout.strip().splitlines()[-1]


@contextmanager
def redis_broker() -> Iterator[Broker]:
    port = free_port()
    command = [redis_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    LOG_DIR.mkdir(exist_ok=True)
    log_path = LOG_DIR / f"redis-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen([*command, "--loglevel", "warning"], stdout=log, stderr=log)
    broker = Broker(f"redis://127.0.0.1:{port}/0", process)
    try:
        with broker.client() as client:

            def answers() -> bool:
                if process.poll() is not None:
                    raise RuntimeError(f"redis-server exited: {log_path.read_text(errors='replace')[-2000:]}")
                try:
                    return bool(client.ping())
                except redis.ConnectionError:
                    return False

            wait_until(answers, 30, "redis-server to answer PING")
        yield broker
    finally:
        process.terminate()
        process.wait(30)
    log_path.unlink(missing_ok=True)


@contextmanager
def celery_worker(broker: Broker, pool: str, concurrency: int) -> Iterator[subprocess.Popen[bytes]]:
    LOG_DIR.mkdir(exist_ok=True)
    log_path = LOG_DIR / f"celery-worker-{os.getpid()}.log"
    command = [sys.executable, "-m", "celery", "-A", "loadtest.celery_app", "worker", "--pool", pool]
    command += ["--concurrency", str(concurrency), "--loglevel", "WARNING", "--without-gossip", "--without-mingle"]
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            command, cwd=REPO_ROOT, env={**os.environ, "PEER_BROKER_URL": broker.url}, stdout=log, stderr=log
        )
    try:
        yield worker
    finally:
        worker.terminate()
        try:
            worker.wait(60)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(10)
    if worker.returncode in (0, -15):
        log_path.unlink(missing_ok=True)


def add_celery_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pool", default="threads", help="Celery worker pool: threads or prefork (default threads)")
    parser.add_argument("--concurrency", type=int, default=10, help="Celery worker concurrency (default 10)")


def label(pool: str, concurrency: int) -> str:
    return f"Celery {celery.__version__}, Redis broker, pool {pool} x{concurrency}, no result backend"


@contextmanager
def sender(broker: Broker) -> Iterator[celery.Celery]:
    """A Celery app of this process that sends to `broker` (by task name: the tasks live in the worker)."""
    app = celery.Celery("jobsched_peer_sender", broker=broker.url)
    app.conf.update(task_default_queue=celery_app.QUEUE, task_ignore_result=True)
    try:
        yield app
    finally:
        app.close()


@contextmanager
def warmed_celery(pool: str, concurrency: int) -> Iterator[tuple[celery.Celery, redis.Redis]]:
    """A Celery worker on a Redis of its own once it ran a first task, with an app that sends to it and a client
    of the Redis the tasks report to."""
    with (
        redis_broker() as broker,
        celery_worker(broker, pool, concurrency),
        sender(broker) as app,
        broker.client() as reports,
    ):
        app.send_task("peer.noop")  # warm-up: the worker is up and consuming
        wait_until(lambda: int(reports.get(celery_app.RUNS_KEY) or 0) >= 1, 120, "the Celery worker's first task")
        yield app, reports


def measure_celery_drain(count: int, pool: str, concurrency: int, time_box_s: float) -> tuple[Run, Figures]:
    """The drain, and figures beside it: the seconds it took to send the tasks before, and redis-server's CPU
    per job."""
    with redis_broker() as broker, sender(broker) as app, broker.client() as reports:
        sending = time.monotonic()
        with app.producer_or_acquire() as producer:
            for _ in range(count):
                app.send_task("peer.noop", producer=producer)
        sent_s = time.monotonic() - sending
        redis_before = process_cpu_s(broker.process.pid) or 0.0
        started, cpu = time.monotonic(), CpuWindow()
        with celery_worker(broker, pool, concurrency) as worker:
            done, elapsed = count_until(lambda: int(reports.get(celery_app.RUNS_KEY) or 0), count, started, time_box_s)
            cpu_per_job = cpu.per_job(done, process_tree_cpu_s(worker.pid))
            redis_s = (process_cpu_s(broker.process.pid) or 0.0) - redis_before
    if done:
        cpu_per_job["broker"] = round(redis_s * 1000 / done, 2)
    return Run(label(pool, concurrency), done, elapsed, cpu_per_job), {"send_seconds": round(sent_s, 2)}


def measure_celery_timed(
    rate: float, window_s: float, settle_s: float, pool: str, concurrency: int, *, ahead: bool
) -> Figures:
    """Tasks at `rate` per second over `window_s`: sent ahead with an eta (`ahead`), or each at its time and
    due at once. Every task records start - due; a task that never started counts as not started."""
    total = int(rate * window_s)
    with warmed_celery(pool, concurrency) as (app, reports):
        first_due = time.time() + LEAD_S
        send_lag_ms = 0.0
        with app.producer_or_acquire() as producer:
            for n in range(total):
                due = first_due + n / rate
                if ahead:
                    eta = datetime.fromtimestamp(due, UTC)
                    app.send_task("peer.timed", args=[due], eta=eta, producer=producer)
                    send_lag_ms = max(send_lag_ms, (time.time() - due) * 1000)
                else:
                    time.sleep(max(0.0, due - time.time()))
                    app.send_task("peer.timed", args=[time.time()], producer=producer)
        deadline = first_due + window_s + settle_s
        count_until(
            lambda: int(reports.get(celery_app.RUNS_KEY) or 0), total + 1, time.monotonic(), deadline - time.time()
        )
        delays = [float(v) for v in reports.lrange(celery_app.DELAYS_KEY, 0, -1)]
    started = len(delays)
    return {
        "rate": rate,
        "window_s": window_s,
        "jobs": total,
        "started": started,
        "censored": total - started,
        ("lateness_ms" if ahead else "send_to_start_ms"): summary(delays),
        "send_lag_ms": round(send_lag_ms, 1),
        "setting": label(pool, concurrency) + (", apply_async(eta=...)" if ahead else ", apply_async() due now"),
    }
