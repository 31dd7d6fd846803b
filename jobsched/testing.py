"""Helpers for testing an application's own job types.

    from jobsched import testing

    def test_the_report_is_written(tmp_path):
        assert testing.run(write_report, Report(day="2026-12-04")) is None

    def test_the_whole_path():                      # needs the server extra
        with testing.embedded(jobs) as client:
            job = client.enqueue(write_report, Report(day="2026-12-04"))
            assert client.wait(job.id).status == "completed"

`run` calls the handler as an executor does: the payload goes through its stored form (JSON) and back into
the handler's payload type, and an async handler runs to completion. `embedded` runs the whole product in this
process on a temporary SQLite file, serving only the collections given, and hands out a Client.
"""

from __future__ import annotations

import asyncio
import json
import logging
import tempfile
import threading
import uuid
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

from jobsched.client import Client
from jobsched.handlers import HandlerContext, JobLogger, JobType, JobTypes, not_a_coroutine

__all__ = ["arun", "context", "embedded", "run", "stored"]

P = TypeVar("P")
R = TypeVar("R")

log = logging.getLogger("jobsched.testing")


def context(
    job_type: str = "test",
    *,
    job_id: str | None = None,
    attempt: int = 1,
    tenant_id: str = "test",
    timeout: timedelta = timedelta(minutes=5),
    scheduled_at: datetime | None = None,
    planned_at: datetime | None = None,
    template_id: str | None = None,
    cancelled: threading.Event | None = None,
    progress: list[Any] | None = None,
) -> HandlerContext:
    """A HandlerContext as an executor builds it; set `cancelled` to test a handler's cancellation path, and
    pass a list as `progress` to collect what the handler reports with ctx.report_progress."""
    now = datetime.now(UTC)
    job_id = job_id or uuid.uuid4().hex[:24]
    return HandlerContext(
        job_id=job_id,
        job_type=job_type,
        attempt=attempt,
        deadline=now + timeout,
        tenant_id=tenant_id,
        scheduled_at=scheduled_at or now,
        logger=JobLogger(log, {"jobId": job_id, "jobType": job_type, "attempt": attempt}),
        cancelled=cancelled or threading.Event(),
        planned_at=planned_at,
        template_id=template_id,
        on_progress=progress.append if progress is not None else lambda value: None,
    )


def stored(job_type: JobType[P, Any], payload: P) -> dict[str, Any]:
    """The payload as the store keeps it: encoded for the type and through JSON (a TypeError or ValueError
    when the API would refuse it)."""
    document = payload if isinstance(payload, dict) else job_type.encode(payload)
    return cast(dict[str, Any], json.loads(json.dumps(document, allow_nan=False)))


def run(job_type: JobType[P, R], payload: P | dict[str, Any], ctx: HandlerContext | None = None) -> Any:
    """Run the handler once, as an executor would, and return what it returned (an async one is awaited on a
    new event loop; from inside a running loop, use `arun`). What it raises, propagates."""
    result = _called(job_type, payload, ctx)
    if job_type.is_async:
        return asyncio.run(cast(Coroutine[Any, Any, Any], result))
    return not_a_coroutine(result, job_type.name)


async def arun(job_type: JobType[P, R], payload: P | dict[str, Any], ctx: HandlerContext | None = None) -> Any:
    """`run` from async code: an async handler is awaited on the running loop."""
    result = _called(job_type, payload, ctx)
    if job_type.is_async:
        return await result
    return not_a_coroutine(result, job_type.name)


def _called(job_type: JobType[P, R], payload: P | dict[str, Any], ctx: HandlerContext | None) -> Any:
    """The handler called as an executor calls it: what it returned (a coroutine for an async one)."""
    return job_type.fn(stored(job_type, cast(P, payload)), ctx or context(job_type.name))


@contextmanager
def embedded(*collections: JobTypes, tenant_id: str = "test", db: str | Path | None = None) -> Iterator[Client]:
    """The whole product in this process, serving the job types of `collections`, on a temporary SQLite file
    (or `db`) and a free loopback port; yields a Client for `tenant_id`. Needs the server extra."""
    from jobsched.server import Embedded, Settings

    served = JobTypes()
    for collection in collections:
        served.include(collection)
    # Claims every 50 ms rather than every second: a test waits for its jobs, not for the next tick.
    settings = Settings(scheduler_tick=timedelta(milliseconds=50), auth="off", log_level="WARNING")
    with tempfile.TemporaryDirectory(prefix="jobsched-test-") as directory:
        path = Path(db) if db is not None else Path(directory) / "jobs.db"
        node = Embedded(path, settings=settings, handlers=served, host="127.0.0.1", port=0)
        with node, Client(node.url, tenant_id=tenant_id) as client:
            yield client
