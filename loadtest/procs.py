"""Product processes for the benchmarks: start `python -m services.<name>` with an environment, read its
Prometheus metrics, stop it; the scheduler + noop-executor pipeline on a MongoDB database, and the whole
distributed stack (API, schedulers, executors, reaper).

Each process logs to a file under a temporary folder (kept when the process died early, so its tail can be
shown); the benchmark keeps the Popen handle and stops only what it started.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from loadtest.benchkit import REFERENCE_CLAIMS, Run, setting_label
from loadtest.cpu import CpuWindow, process_cpu_s

REPO_ROOT = Path(__file__).resolve().parent.parent
LOG_DIR = Path(tempfile.gettempdir()) / "jobsched-bench"
PROFILE_ENV = "JOBSCHED_BENCH_PROFILE"  # a folder: run every product process under loadtest.profiled
# In a stack's env, a folder: run each process under loadtest.store_work.recorded (its store commands written down)
STORE_WORK_ENV = "JOBSCHED_BENCH_STORE_WORK"


# Listening ports come from below the kernel's ephemeral range (ip_local_port_range, from 32768 by default),
# which every outgoing connection draws from: a port probed free there may be some connection's before the
# service it was picked for binds it (a stack's executor once found its metrics port taken so). Each pytest-xdist
# worker has a block of its own, so that two workers never hand out the same port; the local servers' fixed ports
# (deployments/local/*.sh) lie outside the blocks. Within a block ports are handed out in turn from a cursor: one
# comes back only after the whole block, not as soon as a probe lets go of it (the kernel's way).
_PORT_BLOCKS = (range(28000, 30000), range(30000, 32000))
_port_lock = threading.Lock()
_port_cursor: list[int] = []  # the next port to try, once the block is known


def _block() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    return _PORT_BLOCKS[index % len(_PORT_BLOCKS)]


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(count: int) -> int:
    """The first of `count` consecutive loopback ports, each free now and the next in turn of this process's
    block (see above)."""
    block = _block()
    with _port_lock:
        if not _port_cursor:
            _port_cursor.append(block.start + uuid.uuid4().int % len(block))  # processes of one worker apart
        for _ in range(len(block)):
            base = _port_cursor[0]
            if base + count > block.stop:
                base = block.start
            _port_cursor[0] = base + count
            if all(_bindable(port) for port in range(base, base + count)):
                return base
    raise RuntimeError(f"no {count} consecutive free ports in {block}")


def free_port() -> int:
    """A loopback port free now, and the next in turn of this process's block (see above)."""
    return free_ports(1)


def wait_until(check: Callable[[], object], timeout_s: float, what: str, interval_s: float = 0.05) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)


class Service:
    """One product process. `metric()` reads its /metrics (None while it does not answer)."""

    def __init__(self, module: str, env: dict[str, str], *args: str, name: str | None = None) -> None:
        self.name = name or module
        self.metrics_port = free_port()
        LOG_DIR.mkdir(exist_ok=True)
        self.log_path = LOG_DIR / f"{self.name}-{uuid.uuid4().hex[:6]}.log"
        command = ["-m", f"services.{module}", *args]
        env = dict(env)
        if env.pop(REFERENCE_CLAIMS, None) == "single" and module in ("scheduler", "dev"):
            command = ["-m", "loadtest.reference", module, *args]
        if profile_dir := os.environ.get(PROFILE_ENV):
            command = ["-m", "loadtest.profiled", str(Path(profile_dir) / f"{self.log_path.stem}.prof"), *command[1:]]
        elif record_dir := env.pop(STORE_WORK_ENV, None):
            out = str(Path(record_dir) / f"{self.log_path.stem}.jsonl")
            command = ["-m", "loadtest.store_work.recorded", out, *command[1:]]
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, *command],
                env={**os.environ, "LOG_LEVEL": "WARNING", **env, "METRICS_PORT": str(self.metrics_port)},
                cwd=REPO_ROOT,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )

    def metric(self, name: str) -> float | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2) as response:
                text = response.read().decode()
        except OSError:
            self.check_alive()
            return None
        found = [s.value for family in text_string_to_metric_families(text) for s in family.samples if s.name == name]
        return sum(found)

    def check_alive(self) -> None:
        code = self.process.poll()
        if code is not None:
            tail = self.log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{self.name} exited with {code}; its log ({self.log_path}) ends:\n{tail}")

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def stop(self, timeout_s: float = 60) -> None:
        """SIGTERM, then SIGKILL if it has not exited within `timeout_s`."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self.process.returncode in (0, -signal.SIGTERM, -signal.SIGKILL):
            self.log_path.unlink(missing_ok=True)


@contextmanager
def running(*services: Callable[[], Service]) -> Iterator[list[Service]]:
    """Start the services (in order) and stop every one started, whatever happens."""
    with ExitStack() as stack:
        started = []
        for make in services:
            service = make()
            stack.callback(service.stop)
            started.append(service)
        yield started


def pipeline_env(uri: str, brokers: str, database: str, env: dict[str, str]) -> dict[str, str]:
    """The environment of product processes isolated to `database`, fresh topics and election key."""
    return {
        "MONGO_URI": uri,
        "MONGO_DB": database,
        "KAFKA_BROKERS": brokers,
        "KAFKA_TOPIC_PREFIX": f"bench-{uuid.uuid4().hex[:8]}-",
        "ELECTION_KEY": f"/bench/{database}",
        **env,
    }


def count_until(count: Callable[[], int], target: int, started: float, time_box_s: float | None) -> tuple[int, float]:
    """Poll `count()` until it reaches `target` or the time box (from `started`) ends: (count, seconds)."""
    deadline = started + time_box_s if time_box_s else float("inf")
    while (done := count()) < target and time.monotonic() < deadline:
        time.sleep(0.2)
    return done, time.monotonic() - started


class Pipeline:
    """A scheduler and a noop executor running on one database."""

    def __init__(self, services: list[Service]) -> None:
        self._services = services

    def completed(self) -> int:
        """The jobs completed so far (and a failure if either process died).

        The count is the executor's executor_jobs_processed_total (raised once the job is written completed),
        not a count query: on FerretDB 1.x a count decoded every matching document, and polling it took a third of
        the server's CPU away from the run being measured."""
        for service in self._services:
            service.check_alive()
        return int(self._services[1].metric("executor_jobs_processed_total") or 0)

    def cpu_seconds(self) -> float | None:
        """The CPU the two processes have used so far, or None where that cannot be read."""
        total = 0.0
        for service in self._services:
            used = process_cpu_s(service.process.pid)
            if used is None:
                return None
            total += used
        return total


@contextmanager
def pipeline(uri: str, brokers: str, database: str, env: dict[str, str]) -> Iterator[Pipeline]:
    """The scheduler and the noop executor as processes on `database`, stopped on exit."""
    common = pipeline_env(uri, brokers, database, env)
    with running(
        lambda: Service("scheduler", common),
        lambda: Service("executor", common, "--type", "noop", name="executor-noop"),
    ) as services:
        yield Pipeline(services)


def run_pipeline(
    uri: str, brokers: str, database: str, count: int, env: dict[str, str], time_box_s: float | None
) -> Run:
    """The pipeline on `database` (already seeded): time from its start until `count` jobs are completed (or
    the time box ends), and the CPU per job (the machine's, and the two processes')."""
    started, cpu = time.monotonic(), CpuWindow()
    with pipeline(uri, brokers, database, env) as pipe:
        done, elapsed = count_until(pipe.completed, count, started, time_box_s)
        cpu_per_job = cpu.per_job(done, pipe.cpu_seconds())
    return Run(setting_label(env), done, elapsed, cpu_per_job)


@dataclass
class Stack:
    """The processes of a distributed stack, and where its API answers."""

    base_url: str
    services: list[Service]

    def named(self, prefix: str) -> list[Service]:
        return [s for s in self.services if s.name.startswith(prefix)]

    def metric_total(self, prefix: str, name: str) -> float:
        """`name` summed over the live processes whose name starts with `prefix` (one that does not answer: 0)."""
        return sum(s.metric(name) or 0.0 for s in self.named(prefix) if s.process.poll() is None)

    def api_ready(self) -> bool:
        for api in self.named("api"):
            api.check_alive()
        try:
            with urllib.request.urlopen(f"{self.base_url}/readyz", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:  # refused, timed out, or an HTTP error status (503 while the store is not ready)
            return False


@contextmanager
def distributed_stack(
    env: dict[str, str], *, schedulers: int = 1, executors: Sequence[str] = ("noop",), reaper: bool = False
) -> Iterator[Stack]:
    """An API, `schedulers` schedulers (each nudged by the API and the executors over UDP, as deployments/docker
    wires them), one
    executor per entry of `executors` (its job type) and, with `reaper`, a reaper, as processes on `env`
    (pipeline_env); yielded once a scheduler leads and the API is ready, stopped on exit."""
    api_port = free_port()
    nudge_ports = [free_port() for _ in range(schedulers)]
    # The API (a job created due) and the executors (a job others waited for ended) nudge every scheduler.
    targets = ",".join(f"127.0.0.1:{port}" for port in nudge_ports)
    makers: list[Callable[[], Service]] = [
        partial(
            Service,
            "scheduler",
            {**env, "NODE_ID": f"scheduler-{n}", "NUDGE_LISTEN": f"127.0.0.1:{port}"},
            name=f"scheduler-{n}",
        )
        for n, port in enumerate(nudge_ports)
    ]
    makers += [
        partial(Service, "executor", {**env, "NUDGE_TARGETS": targets}, "--type", t, name=f"executor-{t}-{n}")
        for n, t in enumerate(executors)
    ]
    if reaper:
        makers.append(partial(Service, "reaper", env))
    makers.append(partial(Service, "api", {**env, "API_PORT": str(api_port), "NUDGE_TARGETS": targets}))
    with running(*makers) as services:
        stack = Stack(f"http://127.0.0.1:{api_port}", services)
        leading = stack.named("scheduler")
        wait_until(lambda: any(s.metric("scheduler_is_leader") == 1 for s in leading), 120, "a scheduler to lead")
        wait_until(stack.api_ready, 120, "the API to answer /readyz")
        yield stack
