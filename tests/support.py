"""Helpers shared by the test tiers: waiting on conditions, free ports, product processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from loadtest.procs import free_port as free_port  # re-exported: the tests take it from here
from shared.backends import Backend, mongo_backend, sqlite_backend
from shared.bus.base import Wakeup
from shared.model import Job, Status
from shared.sealing import Keyring
from shared.store.base import AttemptStart, ExecutorStore, JobStore, only_answer
from shared.store.browse import JobQuery
from shared.store.mongo import MongoJobStore
from shared.store.sqlite import SqliteJobStore

T = TypeVar("T")
# Where in-process API tests address the API: a name it serves without authentication (same_origin.py).
LOCAL = "http://localhost"
REPO_ROOT = Path(__file__).resolve().parent.parent


class MovedClock:
    """A monotonic clock the test moves (`now`): what reads it comes when the test says."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def wait_until(condition: Callable[[], T | None], timeout: float, what: str, interval: float = 0.05) -> T:
    """Poll `condition` until it returns something truthy; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def scrape(port: int, metric: str) -> float | None:
    """A metric from a process's /metrics, summed over its label sets; None when the process does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            text = response.read().decode()
    except OSError:
        return None
    values = [
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith((metric + " ", metric + "{"))
    ]
    return sum(values) if values else 0.0


class ServiceProcess:
    """One product binary (`python -m services.<name>`, or the `command` given) run as a real process with its own
    env."""

    def __init__(
        self,
        service: str,
        env: dict[str, str],
        log_dir: Path,
        name: str | None = None,
        args: list[str] | None = None,
        command: list[str] | None = None,
        *,
        metrics_port: bool = True,
    ) -> None:
        """`metrics_port`: give the process a free METRICS_PORT of its own (False: the product's default)."""
        self.name = name or service
        self.metrics_port = free_port()
        self.log_path = log_dir / f"{self.name}.log"
        full_env = {**os.environ, **env, "METRICS_PORT": str(self.metrics_port), "LOG_LEVEL": "INFO"}
        if not metrics_port:
            del full_env["METRICS_PORT"]
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [*(command or [sys.executable, "-m", f"services.{service}"]), *(args or [])],
            env=full_env,
            cwd=REPO_ROOT,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def metric(self, name: str) -> float | None:
        return scrape(self.metrics_port, name)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def terminate(self, timeout: float = 20) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._log.close()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")


def read_messages(brokers: str, topic: str, expected: int, timeout: float = 30) -> list[bytes]:
    """Every message value on `topic` from the beginning, once `expected` have arrived (or after timeout)."""
    consumer = Consumer(
        {
            "bootstrap.servers": brokers,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    found: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(found) < expected and time.monotonic() < deadline:
            found.extend(m.value() or b"" for m in consumer.consume(500, timeout=0.5) if m.error() is None)
    finally:
        consumer.close()
    return found


def read_wakeups(brokers: str, topic: str, expected: int) -> list[Wakeup]:
    return [Wakeup.decode(raw) for raw in read_messages(brokers, topic, expected)]


def read_events(brokers: str, prefix: str, expected: int, topic: str = "jobs.events") -> list[dict[str, Any]]:
    """JSON records on `<prefix><topic>` (lifecycle events by default, or jobs.dlq)."""
    return [json.loads(raw) for raw in read_messages(brokers, prefix + topic, expected)]


def installed_distribution(directory: Path, dist: str, entry_points: str) -> None:
    """What `pip install` leaves for importlib.metadata in a site directory: a dist-info with METADATA and the
    `jobsched.handlers` entry points given as `name = target` lines (the code itself goes beside it)."""
    info = directory / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[jobsched.handlers]\n{entry_points}\n")


def delete_topics(brokers: str, prefix: str) -> None:
    """Delete the topics whose names start with `prefix`, waiting for the broker's answer; a topic that is
    already gone, or a broker that is down, is no error (nothing is left to clean up, or nothing can be)."""
    admin = AdminClient({"bootstrap.servers": brokers})
    try:
        names = [name for name in admin.list_topics(timeout=5).topics if name.startswith(prefix)]
    except Exception:  # a broker the test stopped: its topics went with it
        return
    if not names:
        return
    for future in admin.delete_topics(names, operation_timeout=10).values():
        with contextlib.suppress(Exception):  # already deleted, or the broker went away meanwhile
            future.result(timeout=15)


def backend_beside(store: JobStore, keyring: Keyring | None = None) -> Backend:
    """The backend of a store a test opened itself (its job types, console reader and keys beside it); secrets
    sealed with `keyring` (none: without a key, as a distributed process that was given none)."""
    if isinstance(store, SqliteJobStore):
        return sqlite_backend(store, keyring)
    assert isinstance(store, MongoJobStore), type(store)
    return mongo_backend(store, keyring)


def tenant_jobs(store: JobStore, tenant_id: str, status: Status | None = None, limit: int = 100) -> list[Job]:
    """A tenant's jobs, newest first, as GET /jobs lists them (the console reader beside the store)."""
    return backend_beside(store).browser.page(tenant_id, JobQuery(status=status, limit=limit))


def start_one(store: ExecutorStore, start: AttemptStart) -> Job:
    """One wake-up's start as an executor makes it (start_attempts with a batch of one): the running job, or
    the store's refusal raised."""
    return only_answer(store.start_attempts([start]))
