"""Workflows through the whole embedded product (`jobsched.testing.embedded`: API, scheduler, executor on SQLite)
and the Python clients: a workflow built with chain, group and fan_in runs each step after its parents, a step
reads its parents' results by step name and type, a failed step fails the workflow and cancels what waits on it,
a cancelled workflow stops. (`jobsched workflows` is in test_operator_cli.py.)"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from datetime import timedelta

import pytest

import jobsched
from jobsched import AsyncClient, HandlerContext, JobTypes, testing
from shared.model import utc_now
from tests.support import wait_until

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Part:
    name: str
    fail: bool = False


@dataclass(frozen=True)
class Counted:
    name: str
    rows: int


def test_a_workflow_runs_each_step_after_its_parents_and_reads_their_results_by_name() -> None:
    spans: dict[str, tuple[float, float]] = {}
    lock = threading.Lock()
    jobs = JobTypes()

    @jobs.handler("part", max_attempts=1)
    def part(payload: Part, ctx: HandlerContext) -> Counted:
        began = time.monotonic()
        time.sleep(0.02)  # a handler's own work, so that a step started too early would overlap its parent
        with lock:
            spans[payload.name] = (began, time.monotonic())
        return Counted(payload.name, len(payload.name))

    @jobs.handler("total", max_attempts=1)
    def total(payload: Part, ctx: HandlerContext) -> dict[str, int]:
        with lock:
            spans[payload.name] = (time.monotonic(), time.monotonic())
        return {name: ctx.step_result(name, Counted).rows for name in ctx.step_results()}

    with testing.embedded(jobs) as client:
        flow = client.workflow(name="etl")
        extract = flow.step("extract", part, Part("extract"))
        parts = flow.group(*(flow.step(f"part-{n}", part, Part("x" * n)) for n in range(1, 4)))
        load = flow.step("load", total, Part("load"))
        flow.chain(extract, parts)
        flow.fan_in(parts, load)
        created = flow.submit()
        assert created.status == "running"
        assert created.step("load").status == "waiting"
        done = client.wait_workflow(created.id, timeout=30)
        assert done.status == "succeeded"
        assert {s.status for s in done.steps} == {"completed"}
        load_job = client.get(done.step("load").job_id)
        assert (load_job.workflow_id, load_job.step) == (created.id, "load")
        assert load_job.result == {"part-1": 1, "part-2": 2, "part-3": 3}
        assert [w.id for w in client.workflows()] == [created.id]
    for n in range(1, 4):
        assert spans["x" * n][0] >= spans["extract"][1]
        assert spans["load"][0] >= spans["x" * n][1]


def test_a_failed_step_fails_the_workflow_and_a_cancel_stops_one() -> None:
    jobs = JobTypes()

    @jobs.handler("part", max_attempts=1)
    def part(payload: Part, ctx: HandlerContext) -> None:
        if payload.fail:
            raise RuntimeError(f"{payload.name} failed")

    with testing.embedded(jobs) as client:
        flow = client.workflow("fails")
        first = flow.step("first", part, Part("first", fail=True))
        flow.step("after", part, Part("after"), after=first)
        flow.step("anyway", part, Part("anyway"), after=first, on_parent_failure="run")
        failed = client.wait_workflow(flow.submit().id, timeout=30)
        assert failed.status == "failed"
        assert {s.name: s.status for s in failed.steps} == {"first": "dlq", "after": "cancelled", "anyway": "completed"}

        later = client.workflow("later", scheduled_at=utc_now() + timedelta(hours=1))
        later.chain(later.step("a", part, Part("a")), later.step("b", part, Part("b")))
        waiting = later.submit()
        cancelled = client.cancel_workflow(waiting.id)
        assert cancelled.status == "cancelled"
        assert {s.status for s in cancelled.steps} == {"cancelled"}
        again = client.workflow("later")
        again.step("a", part, Part("a"))
        with pytest.raises(jobsched.DuplicateWorkflow) as taken:
            again.submit()
        assert taken.value.workflow_id == waiting.id

        async def submitted_async() -> str:
            async with AsyncClient(client.base_url, tenant_id="test") as aclient:
                flow = aclient.workflow("async")
                flow.step("only", part, Part("only"))
                workflow = await flow.submit()
                return (await aclient.wait_workflow(workflow.id, timeout=30)).status

        assert asyncio.run(submitted_async()) == "succeeded"


def test_a_schedule_fires_the_workflow_at_each_of_its_times_and_skips_while_one_runs() -> None:
    """An every-second schedule of extract → 2 parts → load (overlap skip): the scheduler writes each fire time's
    run as a workflow of those steps, run in order, and makes no new one while a step of the last is not final."""
    jobs = JobTypes()
    release = threading.Event()
    loads: list[str] = []

    @jobs.handler("part", max_attempts=1)
    def part(payload: Part, ctx: HandlerContext) -> Counted:
        return Counted(payload.name, len(payload.name))

    @jobs.handler("total", max_attempts=1)
    def total(payload: Part, ctx: HandlerContext) -> int:
        release.wait(30)  # the first run's load holds its run open while fire times pass
        loads.append(ctx.job_id)
        return sum(ctx.step_result(name, Counted).rows for name in ctx.step_results())

    with testing.embedded(jobs) as client:
        flow = client.workflow("nightly", name="etl")
        extract = flow.step("extract", part, Part("extract"))
        parts = flow.group(flow.step("part-1", part, Part("a")), flow.step("part-2", part, Part("bb")))
        flow.chain(extract, parts, flow.step("load", total, Part("load")))
        schedule = flow.schedule(interval="1s", policy={"overlap": "skip"})
        assert (schedule.job_type, schedule.interval) == ("jobsched.workflow", "1s")

        def first_load_running() -> list[jobsched.Job]:
            runs = client.runs(schedule.id)
            return [r for r in runs if r.step == "load" and r.status == "running"]

        [load] = wait_until(first_load_running, 30, "the first run's load to start")
        assert load.workflow_id is not None
        # Fire times pass while `load` runs: skipped, so the first run stays the only one.
        passed = client.get(schedule.id).scheduled_at
        assert passed is not None
        wait_until(lambda: (client.get(schedule.id).scheduled_at or passed) > passed, 10, "a fire time handled")
        assert {r.workflow_id for r in client.runs(schedule.id)} == {load.workflow_id}
        release.set()
        first = client.wait_workflow(load.workflow_id, timeout=30)
        assert first.status == "succeeded"
        assert loads[0] == load.id
        assert client.get(first.step("load").job_id).result == 3
        # The next fire time after it ended writes the next run, a workflow of the same steps.
        later = wait_until(
            lambda: [w for w in client.workflows() if w.id != first.id], 30, "the next fire time's workflow"
        )
        second = client.wait_workflow(later[0].id, timeout=30)
        assert (second.status, second.name, [s.name for s in second.steps]) == (
            "succeeded",
            "etl",
            ["extract", "part-1", "part-2", "load"],
        )
