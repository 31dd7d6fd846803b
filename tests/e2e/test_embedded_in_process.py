"""jobsched run inside an application's own process (`services.embedded.Embedded`): started and stopped from
Python, with the application's own handlers, reached through the client."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

import httpx2 as httpx
import pytest

from jobsched import HandlerContext, JobTypes, Payload
from jobsched.client import Client
from services.embedded import Embedded
from services.embedded.node import DatabaseInUse
from shared.config import ConfigError, Settings

pytestmark = pytest.mark.e2e
SETTINGS = Settings(scheduler_tick=timedelta(milliseconds=100))


def application_handlers(seen: list[tuple[str, Payload]]) -> JobTypes:
    handlers = JobTypes()

    @handlers.handler("send-welcome", timeout=10)
    def send_welcome(payload: Payload, ctx: HandlerContext) -> None:
        seen.append((ctx.job_id, payload))

    return handlers


def test_an_application_starts_and_stops_jobsched_in_its_own_process(tmp_path: Path) -> None:
    seen: list[tuple[str, Payload]] = []
    threads_before = set(threading.enumerate())
    node = Embedded(tmp_path / "app-jobs.db", settings=SETTINGS, port=0, handlers=application_handlers(seen))
    node.start()
    try:
        with Client(node.url) as client:
            job = client.create("send-welcome", {"user": 42}, tenant_id="app")
            done = client.wait(job.id, timeout=30)
        assert done.status == "completed"
        assert seen == [(job.id, {"user": 42})]
        with pytest.raises(DatabaseInUse):  # one process per file, even within one process
            Embedded(tmp_path / "app-jobs.db", settings=SETTINGS, port=0, handlers=JobTypes()).start()
    finally:
        node.stop()
    # Every thread it started has ended, but the process's pool of handler threads: idle daemons, reused by the
    # next executor (services/executor/handler_calls.py).
    assert {t.name for t in set(threading.enumerate()) - threads_before if t.name != "handler"} == set()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{node.url}/healthz")

    # The file is free again, and a new instance resumes from it.
    again = Embedded(tmp_path / "app-jobs.db", settings=SETTINGS, port=0, handlers=application_handlers(seen))
    with again, Client(again.url) as client:
        assert client.get(job.id).status == "completed"


def test_the_database_path_must_be_absolute() -> None:
    with pytest.raises(ConfigError, match="absolute"):
        Embedded("jobs.db", settings=SETTINGS)
