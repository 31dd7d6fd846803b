"""The embedded mode: the whole product in one process on one SQLite file, nothing else installed.

API and console, scheduler, one executor per registered job type and the reaper, on the embedded
implementations (SQLite store, in-process bus, single-node election). `jobsched standalone` (a service),
`jobsched dev` (the developer's shortcut) and an application that runs jobsched inside its own process all
use `Embedded`:

    node = Embedded("/var/lib/myapp/jobs.db", port=0)   # port 0: any free port
    node.start()                                         # returns once the API answers
    ... jobsched.client.Client(node.url) ...
    node.stop()                                          # in-flight handlers finish first

A restart resumes every job from the file. One process per file: a second one on the same file is refused
(its lock file), since two would run jobs twice.

This is the one place that wires several services together; the services themselves never import each other.
"""

from __future__ import annotations

import dataclasses
import fcntl
import logging
import signal
import socket
import stat
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import IO

import uvicorn

from jobsched.handlers import JobTypes
from services.api.auth.api_auth import api_auth
from services.api.http.server import bind
from services.api.wiring import api_server
from services.executor.declared_schedules import announcer_with_schedules
from services.executor.wiring import attempt_runner, executor, with_http_jobs
from services.reaper import sweeper
from services.reaper.retention import Retention
from services.scheduler.dispatcher import Dispatcher, DispatcherFactory
from services.scheduler.scheduler import Scheduler
from shared import tracing
from shared.backends import open_backend, sqlite_url
from shared.bus.memory import MemoryBus
from shared.config import ConfigError, Settings
from shared.election.single import SingleNodeElector
from shared.handlers.builtin import builtin_types
from shared.job_types.limits import LimitsView
from shared.job_types.served import ServedTypes
from shared.metrics import serve_metrics
from shared.sealing_keys import embedded_keyring
from shared.store.base import JobStore

log = logging.getLogger("jobsched.embedded")
FAR_FUTURE = datetime(9999, 1, 1, tzinfo=UTC)
READY_TIMEOUT_S = 30.0


class DatabaseInUse(Exception):
    """Another process runs jobsched on this file (or restores it)."""


def lock_database(path: Path) -> IO[str]:
    """One process per database file: a second one on the same file would run jobs twice. The lock is the
    process's while the returned handle is open."""
    handle = open(f"{path}.lock", "w")  # noqa: SIM115 - held for the life of the process
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise DatabaseInUse(f"{path} is in use by another jobsched process") from None
    return handle


def warn_if_readable_by_others(path: Path) -> None:
    """A file made by an earlier version (or by hand) that others may read holds every tenant's payloads."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:  # a new file: created readable by its owner only
        return
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning(
            "the database file can be read by other users: it holds every tenant's payloads (chmod 600 it)",
            extra={"action": "database_file_readable", "db": str(path), "mode": oct(mode & 0o777)},
        )


def resume(store: JobStore) -> None:
    """After a restart nothing of the previous process is alive: its in-memory wake-ups are gone and its
    handlers are dead. Re-pend queued jobs and close their attempts now instead of after the timeouts."""
    requeued = store.release_stale_claims(FAR_FUTURE)
    recovered = 0
    while stale := store.expired_attempts(FAR_FUTURE, 500):
        recovered += sum(store.recover_attempt(job, "jobsched restarted while it ran") is not None for job in stale)
    if requeued or recovered:
        log.info("resumed", extra={"action": "embedded_resumed", "requeued": requeued, "recovered": recovered})


class Embedded:
    """The whole product on the SQLite file `db` (an absolute path), in this process.

    `settings` default to the environment's (docs/configuration.md); `host` and `port` override its API_HOST
    and API_PORT (port 0 takes a free one: see `url`). `handlers` are the job types that get an executor
    each (default: the built-ins, see DEMO_JOB_TYPES). The metrics port is served only with `metrics=True`: an
    application that embeds jobsched usually has its own. `make_dispatcher` is how the benchmarks' baseline
    swaps in the original claims (loadtest/reference.py). `name` prefixes the executors' worker ids (seen in
    attempt records)."""

    def __init__(
        self,
        db: str | Path,
        *,
        settings: Settings | None = None,
        host: str | None = None,
        port: int | None = None,
        handlers: JobTypes | None = None,
        metrics: bool = False,
        make_dispatcher: DispatcherFactory = Dispatcher.from_settings,
        on_ready: Callable[[Embedded], None] | None = None,
        name: str = "embedded",
    ) -> None:
        path = Path(db)
        if not path.is_absolute():
            raise ConfigError(f"the database path must be absolute, not {str(db)!r}")
        settings = settings or Settings.from_env()
        self.path = path
        self.settings = dataclasses.replace(
            settings,
            api_host=settings.api_host if host is None else host,
            api_port=settings.api_port if port is None else port,
        )
        self._handlers = handlers if handlers is not None else builtin_types(demo=settings.demo_job_types)
        self._metrics = metrics
        self._make_dispatcher = make_dispatcher
        self._on_ready = on_ready
        self._name = name
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._server: uvicorn.Server | None = None
        self._server_thread: threading.Thread | None = None
        self._closers: list[Callable[[], None]] = []  # run last-first by stop()
        self._stop_scheduler: Callable[[], None] | None = None
        self._listener: socket.socket | None = None
        self.url = ""
        self.metrics_url = ""  # where /metrics is served, once started with metrics=True

    def start(self) -> None:
        """Start everything, the API on a thread of its own; returns once the API answers."""
        self._begin_or_undo()
        self._server_thread = threading.Thread(target=self._serve, name="api", daemon=True)
        self._server_thread.start()
        if not self._ready.wait(READY_TIMEOUT_S) or not self._server_thread.is_alive():
            self.stop()
            raise RuntimeError("jobsched's API did not start (see the log)")

    def serve(self) -> None:
        """Start everything and serve the API on this (the main) thread until SIGINT or SIGTERM, then stop."""

        def on_signal(signum: int, frame: FrameType | None) -> None:
            if self._server is not None:
                self._server.should_exit = True

        # uvicorn takes these over while serving and, once stopped, re-raises the signal to the handler that was
        # there before: this one, so the process finishes the shutdown below instead of dying mid-way.
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        self._begin_or_undo()
        try:
            self._serve()
        finally:
            self.stop()

    def stop(self) -> None:
        """Stop accepting requests, let in-flight handlers finish, close the file. Safe to call twice."""
        # A start that failed before anything ran (a taken port, a locked file) ends with its one error line.
        was_running = bool(self._threads)
        if self._server is not None:
            self._server.should_exit = True
        if self._server_thread is not None and self._server_thread is not threading.current_thread():
            self._server_thread.join()
        self._server_thread = None
        if was_running:
            log.info("shutting down: finishing in-flight jobs", extra={"action": "embedded_stopping"})
        if self._stop_scheduler is not None:
            self._stop_scheduler()
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads = []
        while self._closers:
            self._closers.pop()()
        if was_running:
            log.info("stopped", extra={"action": "embedded_stopped"})

    def __enter__(self) -> Embedded:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve(self) -> None:
        assert self._server is not None
        assert self._listener is not None
        # In the main thread uvicorn takes SIGINT and SIGTERM over while serving; elsewhere it leaves them alone.
        self._server.run(sockets=[self._listener])

    def _begin_or_undo(self) -> None:
        try:
            self._begin()
        except BaseException:
            self.stop()
            raise

    def _begin(self) -> None:
        tracing.configure(self._name)  # an application's own tracer provider, or the OTEL_* variables: see there
        settings, path = self.settings, self.path
        # Ports first: a taken one ends the start before anything runs a job, or leaves a file behind (the lock,
        # the secrets key).
        self._listener = bind(settings.api_host, settings.api_port, "API")
        self._closers.append(self._listener.close)
        if self._metrics:
            metrics = serve_metrics(settings.metrics_host, settings.metrics_port)
            metrics_host, metrics_port = metrics.socket.getsockname()[:2]
            self.metrics_url = f"http://{metrics_host}:{metrics_port}/metrics"
            self._closers.append(metrics.server_close)
            self._closers.append(metrics.shutdown)
        # Opening touches no file yet (the lock below comes first); the keys live in the same file as the jobs. The
        # secrets key is the configured one, or the one kept beside the file: read (or made, atomically, on the
        # first start) before the lock, as two processes on one file agree on it anyway.
        backend = open_backend(sqlite_url(str(path)), keyring=embedded_keyring(settings, path))
        self._closers.append(backend.close)
        auth = api_auth(settings, backend.open_keys)
        lock = lock_database(path)
        self._closers.append(lock.close)
        warn_if_readable_by_others(path)
        store = backend.jobs
        store.ensure_schema()
        resume(store)
        host, port = self._listener.getsockname()[:2]
        self.url = f"http://{f'[{host}]' if ':' in host else host}:{port}"

        job_type_registry = backend.job_types
        self._handlers = with_http_jobs(self._handlers, settings, backend)
        bus = MemoryBus()
        job_types = self._handlers.names()  # one executor each: the built-ins and every plug-in's types
        bus.ensure_topics(job_types)
        served = ServedTypes(
            job_type_registry, [*job_types, *settings.job_types], retention=settings.job_type_retention
        )
        scheduler = Scheduler(
            SingleNodeElector(),
            self._make_dispatcher(store, bus, served, settings),
            bus,
            job_types,
            tick_s=settings.scheduler_tick.total_seconds(),
            room_announced=True,  # by the executors below, one for each of job_types
        )
        executors = []
        type_limits = LimitsView(job_type_registry, retention=settings.job_type_retention)
        for job_type in job_types:
            announcer = announcer_with_schedules(
                backend, f"{self._name}-{job_type}", self._handlers[job_type], settings
            )
            # Before the scheduler's first tick: its view of the live types is re-read only every second, and a
            # job created right after start (nudged, with a long tick) must find its type live.
            announcer.announce()
            attempts = attempt_runner(
                settings,
                backend,
                bus,
                self._handlers,
                job_type,
                f"{self._name}-{job_type}",
                type_limits,
                nudge=scheduler.nudge,
                room_freed=scheduler.room_freed,
            )
            loop = executor(attempts, bus.subscribe(job_type), settings, backend, stop=self._stop, announcer=announcer)
            executors.append(threading.Thread(target=loop.run, name=f"executor-{job_type}"))
        reaper = threading.Thread(
            target=sweeper.run,
            name="reaper",
            kwargs={
                "store": store,
                "interval": settings.reaper_interval,
                "queued_timeout": settings.queued_timeout,
                "stop": self._stop,
                "job_types": job_type_registry,
                "retention": settings.job_type_retention,
                "jobs_kept": Retention.from_settings(settings),
            },
        )
        self._threads = [threading.Thread(target=scheduler.run, name="scheduler"), *executors, reaper]
        self._stop_scheduler = scheduler.request_stop
        for thread in self._threads:
            thread.start()
        self._server = api_server(
            settings, backend, auth, local_types=self._handlers, on_due_job=scheduler.nudge, on_ready=self._answering
        )

    def _answering(self) -> None:
        self._ready.set()
        if self._on_ready is not None:
            self._on_ready(self)
