"""The Celery application of the Celery peer benchmark (loadtest/celery_peer.py), imported by its worker
processes (`celery -A loadtest.celery_app worker`) and by the benchmark that sends the tasks. The broker is
the Redis at PEER_BROKER_URL; no result backend (results ignored, as a team that only runs jobs would set it).
Tasks report back through the same Redis: a counter of runs, and each run's delay in a list. A chain's tasks pass
their end time on as the next one's argument (a chain's links need no result backend: the worker sends the next
task itself)."""

from __future__ import annotations

import os
import time

import redis
from celery import Celery

BROKER_URL = os.environ.get("PEER_BROKER_URL", "redis://127.0.0.1:6379/0")
QUEUE = "peer"
RUNS_KEY = "peer:runs"
DELAYS_KEY = "peer:delays_ms"
SPANS_KEY = "peer:spans"  # a chain's links: "<start> <end>" in unix seconds

app = Celery("jobsched_peer", broker=BROKER_URL)
app.conf.update(
    task_ignore_result=True,
    task_default_queue=QUEUE,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)
_reports = redis.Redis.from_url(BROKER_URL)


@app.task(name="peer.noop")  # type: ignore[untyped-decorator]  # celery has no type hints
def noop() -> None:
    _reports.incr(RUNS_KEY)


@app.task(name="peer.timed")  # type: ignore[untyped-decorator]
def timed(due_at: float) -> None:
    """Records how long after `due_at` (unix seconds: its eta, or when it was sent) the task started."""
    started = time.time()
    _reports.rpush(DELAYS_KEY, (started - due_at) * 1000)
    _reports.incr(RUNS_KEY)


@app.task(name="peer.link")  # type: ignore[untyped-decorator]
def link(previous_end: float | None = None) -> float:
    """A link of a chain: records how long after the previous link's end (unix seconds) it started, and returns
    its own end for the next."""
    started = time.time()
    if previous_end is not None:
        _reports.rpush(DELAYS_KEY, (started - previous_end) * 1000)
    ended = time.time()
    _reports.rpush(SPANS_KEY, f"{started} {ended}")
    _reports.incr(RUNS_KEY)
    return ended
