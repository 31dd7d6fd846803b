"""`jobsched dev` / `python -m services.dev`: the whole product in one process, nothing else installed.

API (API_HOST:API_PORT, default 127.0.0.1:8080), scheduler, one executor per registered job type (the
built-ins and those of the handler modules named by --handlers, JOBSCHED_HANDLERS or entry points) and the
reaper, on the embedded implementations: SQLite store (JOBSCHED_DB, default ./jobsched.db), in-process bus,
single-node election. Metrics on METRICS_PORT. Ctrl-C (or SIGTERM) stops accepting work, lets in-flight
handlers finish, and exits; a restart resumes every job from the file.

This is the one place that wires several services together; the services themselves never import each other.
"""

from __future__ import annotations

import argparse
import fcntl
import logging
import os
import signal
import stat
import threading
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import IO

from services.api.app import create_app
from services.api.auth import api_auth
from services.api.job_types import KnownTypes
from services.api.limits import ApiLimits
from services.api.same_origin import allowed_hosts
from services.api.server import bind, make_server
from services.executor.announcer import TypeAnnouncer
from services.executor.runner import Executor
from services.executor.worker import Worker
from services.reaper import sweeper
from services.scheduler.dispatcher import Dispatcher, DispatcherFactory
from services.scheduler.leader import Scheduler
from services.scheduler.served_types import ServedTypes
from shared.bus.memory import MemoryBus
from shared.cli import one_line_errors
from shared.config import ConfigError, Settings
from shared.election.single import SingleNodeElector
from shared.handlers import registry
from shared.handlers.plugins import HANDLERS_VARIABLE, load_handlers_or_exit
from shared.keys.sqlite import SqliteKeyStore
from shared.logging import configure_logging
from shared.metrics import serve_metrics
from shared.store.base import JobStore
from shared.store.sqlite import SqliteJobStore
from shared.store.type_registries import type_registry_of
from shared.type_defaults import BUILTIN_DEFAULTS

log = logging.getLogger("jobsched.dev")
DEFAULT_DB = "jobsched.db"
FAR_FUTURE = datetime(9999, 1, 1, tzinfo=UTC)


def lock_database(path: Path) -> IO[str]:
    """One process per database file: a second `jobsched dev` on the same file would run jobs twice."""
    handle = open(f"{path}.lock", "w")  # noqa: SIM115 - held for the life of the process
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SystemExit(f"jobsched dev: {path} is in use by another jobsched dev process") from None
    return handle


def announce_ready(settings: Settings, path: Path) -> None:
    host = f"[{settings.api_host}]" if ":" in settings.api_host else settings.api_host
    api = f"http://{host}:{settings.api_port}"
    log.info(
        f"jobsched dev ready: API {api}, console {api}/ui/",
        extra={"action": "dev_ready", "api": api, "console": f"{api}/ui/", "db": str(path)},
    )


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
        recovered += sum(store.recover_attempt(job, "jobsched dev restarted while it ran") is not None for job in stale)
    if requeued or recovered:
        log.info("resumed", extra={"action": "dev_resumed", "requeued": requeued, "recovered": recovered})


@one_line_errors("jobsched dev")
def main(make_dispatcher: DispatcherFactory = Dispatcher.from_settings) -> None:
    """`make_dispatcher` is how the benchmarks' baseline swaps in the original claims (loadtest/reference.py)."""
    parser = argparse.ArgumentParser(prog="jobsched dev")
    parser.add_argument(
        "--handlers", default=None, help=f"comma-separated handler modules to load (or {HANDLERS_VARIABLE})"
    )
    args = parser.parse_args()
    load_handlers_or_exit(registry, args.handlers, os.environ, parser.prog)
    settings = Settings.from_env()
    configure_logging("dev", settings.log_level, settings.log_format)
    path = Path(os.environ.get("JOBSCHED_DB", DEFAULT_DB)).resolve()
    try:
        auth = api_auth(settings, lambda: SqliteKeyStore(path))  # keys live in the same file as the jobs
    except ConfigError as exc:
        raise SystemExit(f"jobsched dev: {exc}") from None
    limits = ApiLimits.from_settings(settings)
    # Ports first: a taken one ends the start before anything runs a job, or leaves a lock file behind.
    listener = bind(settings.api_host, settings.api_port, "API")
    serve_metrics(settings.metrics_host, settings.metrics_port)
    lock = lock_database(path)
    warn_if_readable_by_others(path)
    store = SqliteJobStore(str(path))
    store.ensure_schema()
    resume(store)
    job_type_registry = type_registry_of(store)
    bus = MemoryBus()
    job_types = registry.names()  # one executor each: the built-ins and every plug-in's types
    bus.ensure_topics(job_types)
    stop = threading.Event()

    served = ServedTypes(job_type_registry, [*job_types, *settings.job_types], retention=settings.job_type_retention)
    dispatcher = make_dispatcher(store, bus, served, settings)
    scheduler = Scheduler(
        SingleNodeElector(), dispatcher, bus, job_types, tick_s=settings.scheduler_tick.total_seconds()
    )
    announcers = {
        job_type: TypeAnnouncer(
            job_type_registry,
            f"dev-{job_type}",
            {job_type: registry.defaults(job_type) or BUILTIN_DEFAULTS},
            settings.executor_heartbeat,
        )
        for job_type in job_types
    }
    for announcer in announcers.values():
        # Before the scheduler's first tick: its view of the live types is re-read only every second, and a job
        # created right after start (nudged, with a long tick) must find its type live.
        announcer.announce()
    executors = [
        Executor(
            Worker(
                store,
                bus,
                registry,
                job_type,
                f"dev-{job_type}",
                default_timeout=settings.job_timeout,
                lease=settings.claim_timeout,
            ),
            bus.subscribe(job_type),
            store,
            concurrency=settings.executor_concurrency,
            lease=settings.claim_timeout,
            stop=stop,
            heartbeat=settings.executor_heartbeat,
            announcer=announcers[job_type],
        )
        for job_type in job_types
    ]
    threads = [threading.Thread(target=scheduler.run, name="scheduler")]
    threads += [threading.Thread(target=e.run, name=f"executor-{t}") for e, t in zip(executors, job_types, strict=True)]
    threads.append(
        threading.Thread(
            target=sweeper.run,
            name="reaper",
            kwargs={
                "store": store,
                "interval": settings.reaper_interval,
                "queued_timeout": settings.queued_timeout,
                "stop": stop,
                "job_types": job_type_registry,
                "retention": settings.job_type_retention,
            },
        )
    )
    for thread in threads:
        thread.start()
    known_types = KnownTypes(
        job_type_registry, local=registry, configured=settings.job_types, retention=settings.job_type_retention
    )
    app = create_app(
        store,
        auth,
        limits,
        on_due_job=scheduler.nudge,
        due_within=settings.claim_lookahead,
        known_types=known_types,
        allowed_hosts=allowed_hosts(settings),
        on_ready=lambda: announce_ready(settings, path),
    )
    server = make_server(app, settings.api_host, settings.api_port, limits)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        # uvicorn takes these over while serving and, once stopped, re-raises the signal to the handler that
        # was there before: this one, so the process finishes the shutdown below instead of dying mid-way.
        server.should_exit = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        server.run(sockets=[listener])  # returns on Ctrl-C / SIGTERM
    finally:
        log.info("shutting down: finishing in-flight jobs", extra={"action": "dev_stopping"})
        scheduler.request_stop()
        stop.set()
        for thread in threads:
            thread.join()
        store.close()
        lock.close()
        log.info("stopped", extra={"action": "dev_stopped"})


if __name__ == "__main__":
    main()
