"""Helpers for testing an application's own job types.

    from jobsched import testing

    def test_the_report_is_written(tmp_path):
        assert testing.run(write_report, Report(day="2026-12-04")) is None

    def test_the_whole_path():                      # needs the server extra
        with testing.embedded(jobs) as client:
            job = client.enqueue(write_report, Report(day="2026-12-04"))
            assert client.wait(job.id).status == "completed"

    def test_a_bad_day_ends_in_the_dlq():               # its retries at once, not 2, 4, 8 ... s apart
        with testing.embedded(jobs, backoff=testing.NO_BACKOFF) as client:
            job = client.enqueue(write_report, Report(day="not a day"))
            assert client.wait(job.id).status == "dlq"

    def test_the_etl_flows():                       # a workflow's steps in order, no server
        runs = testing.run_workflow(etl_workflow(client), jobs)
        assert runs["load"].status == "completed"

`run` calls the handler as an executor does: the payload goes through its stored form (JSON) and back into
the handler's payload type, and an async handler runs to completion. `embedded` runs the whole product in this
process on a temporary SQLite file, serving only the collections given, and hands out a Client; its `backoff`
replaces the served types' own, so that a test of retries does not wait for them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import tempfile
import threading
import uuid
from collections.abc import Coroutine, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final, TypeVar, cast

from jobsched.backoff import Backoff
from jobsched.client import Client
from jobsched.client.workflows import WorkflowBuilder
from jobsched.handlers import HandlerContext, JobLogger, JobType, JobTypes, ParentResult, not_a_coroutine
from jobsched.outcomes import jsonable_result
from shared import graph

__all__ = ["NO_BACKOFF", "StepRun", "arun", "context", "embedded", "run", "run_workflow", "stored"]

# Retries 1 ms after each failure (a Backoff's wait must be more than 0): `embedded(..., backoff=NO_BACKOFF)`.
NO_BACKOFF: Final = Backoff(base_s=0.001, cap_s=0.001)

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
    parent_results: Mapping[str, Any] | None = None,
    step_results: Mapping[str, Any] | None = None,
) -> HandlerContext:
    """A HandlerContext as an executor builds it; set `cancelled` to test a handler's cancellation path, pass a
    list as `progress` to collect what the handler reports with ctx.report_progress, `parent_results` (by parent
    id) for a handler of a job that waited for others (ctx.parent_results), `step_results` (by step name) for a
    workflow's step (ctx.step_results, step_result)."""
    now = datetime.now(UTC)
    job_id = job_id or uuid.uuid4().hex[:24]
    parents = {parent: ParentResult(None, result) for parent, result in (parent_results or {}).items()}
    parents |= {f"step-{name}": ParentResult(name, result) for name, result in (step_results or {}).items()}
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
        parents=tuple(parents),
        read_results=lambda ids: parents,
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


@dataclasses.dataclass(frozen=True)
class StepRun:
    """How a step of `run_workflow` ended: `completed` with what its handler returned (as the store keeps it:
    JSON), `dlq` with what it raised, or `cancelled` (a parent did not complete, under onParentFailure cancel)."""

    status: str
    result: Any = None
    error: BaseException | None = None


def run_workflow(
    flow: WorkflowBuilder[Any, Any], *collections: JobTypes, tenant_id: str = "test"
) -> dict[str, StepRun]:
    """Run a workflow built with `client.workflow()` in this process, without a server: each step once, after
    its parents, its handler (from `collections`) reading their results by name (ctx.step_results, as stored:
    JSON). A step whose handler raises ends `dlq` (one attempt: retries are the executors'), and cancels the steps
    waiting for it unless they run anyway (onParentFailure "run"), as the product does. The steps by name, in the
    order they ran."""
    steps = {step["name"]: step for step in flow.body()["steps"]}
    order = graph.rounds({name: step.get("after", []) for name, step in steps.items()})
    runs: dict[str, StepRun] = {}
    for name in (name for round_ in order.rounds for name in round_):
        step, parents = steps[name], steps[name].get("after", [])
        if step.get("onParentFailure", "cancel") == "cancel" and any(runs[p].status != "completed" for p in parents):
            runs[name] = StepRun("cancelled")
            continue
        job_type = _served(collections, step["jobType"])
        ctx = context(job_type.name, tenant_id=tenant_id, step_results={p: runs[p].result for p in parents})
        try:
            returned = run(job_type, step["payload"], ctx)
        except Exception as exc:
            runs[name] = StepRun("dlq", error=exc)
        else:
            runs[name] = StepRun("completed", json.loads(json.dumps(jsonable_result(returned))))
    return runs


def _served(collections: tuple[JobTypes, ...], name: str) -> JobType[Any, Any]:
    for collection in collections:
        if (job_type := collection.get(name)) is not None:
            return job_type
    raise LookupError(f"no handler for job type {name!r} in the collections given")


@contextmanager
def embedded(
    *collections: JobTypes,
    tenant_id: str = "test",
    db: str | Path | None = None,
    backoff: Backoff | None = None,
) -> Iterator[Client]:
    """The whole product in this process, serving the job types of `collections`, on a temporary SQLite file
    (or `db`) and a free loopback port; yields a Client for `tenant_id`. Needs the server extra.

    `backoff` replaces the backoff every type of `collections` registered, in this process only: NO_BACKOFF
    retries a failed attempt at once, so that "three attempts, then the DLQ" takes milliseconds rather than
    the 2 + 4 s of the default backoff (a handler's RetryAfter and Snooze keep their own delays)."""
    from jobsched.server import Embedded, Settings

    served = JobTypes()
    for collection in collections:
        served.include(collection)
    if backoff is not None:
        if not isinstance(backoff, Backoff):
            raise TypeError(f"backoff must be a jobsched.Backoff (got {backoff!r})")
        # Copies of the types, so that the application's own JobType objects keep their registration.
        served = JobTypes(_with_backoff(job_type, backoff) for job_type in served)
    # Claims every 50 ms rather than every second: a test waits for its jobs, not for the next tick.
    settings = Settings(scheduler_tick=timedelta(milliseconds=50), auth="off", log_level="WARNING")
    with tempfile.TemporaryDirectory(prefix="jobsched-test-") as directory:
        path = Path(db) if db is not None else Path(directory) / "jobs.db"
        node = Embedded(path, settings=settings, handlers=served, host="127.0.0.1", port=0)
        with node, Client(node.url, tenant_id=tenant_id) as client:
            yield client


def _with_backoff(job_type: JobType[P, R], backoff: Backoff) -> JobType[P, R]:
    """`job_type` with `backoff` in place of its registered one: the executors announce it, and the API stores it
    on the jobs it creates, which are retried with it."""
    return dataclasses.replace(job_type, defaults=dataclasses.replace(job_type.defaults, backoff=backoff))
