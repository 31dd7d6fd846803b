"""Jobs that wait for other jobs, through the whole embedded product (`jobsched.testing.embedded`: API, scheduler,
executor on SQLite) and the Python client: a chain runs in order, a fan-in starts only after all its parents, and a
dead-lettered parent cancels what waits for it."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pytest

from jobsched import HandlerContext, JobTypes, testing

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Step:
    name: str
    fail: bool = False


def test_a_chain_and_a_fan_in_run_after_their_parents() -> None:
    spans: dict[str, tuple[float, float]] = {}
    lock = threading.Lock()
    jobs = JobTypes()

    @jobs.handler("step", max_attempts=1)
    def step(payload: Step, ctx: HandlerContext) -> None:
        began = time.monotonic()
        time.sleep(0.02)  # a handler's own work, so that a child started too early would overlap it
        with lock:
            spans[payload.name] = (began, time.monotonic())

    with testing.embedded(jobs) as client:
        extract = client.enqueue(step, Step("extract"))
        transforms = [client.enqueue(step, Step(f"transform-{n}"), depends_on=[extract]) for n in range(5)]
        load = client.enqueue(step, Step("load"), depends_on=transforms)
        assert load.status == "waiting"
        assert load.depends_on == [t.id for t in transforms]
        assert client.wait(load.id, timeout=30).status == "completed"
        assert {client.get(t.id).status for t in transforms} == {"completed"}
    for n in range(5):
        assert spans[f"transform-{n}"][0] >= spans["extract"][1]
    assert spans["load"][0] >= max(spans[f"transform-{n}"][1] for n in range(5))


def test_a_dead_lettered_parent_cancels_its_dependents_and_run_lets_one_go_on() -> None:
    ran: list[str] = []
    jobs = JobTypes()

    @jobs.handler("step", max_attempts=1)
    def step(payload: Step, ctx: HandlerContext) -> None:
        if payload.fail:
            raise RuntimeError("the extract failed")
        ran.append(payload.name)

    with testing.embedded(jobs) as client:
        extract = client.enqueue(step, Step("extract", fail=True))
        cancelled = client.enqueue(step, Step("load"), depends_on=[extract])
        cleanup = client.enqueue(step, Step("cleanup"), depends_on=[extract], on_parent_failure="run")
        assert client.wait(cleanup.id, timeout=30).status == "completed"
        dead = client.wait(cancelled.id, timeout=30)
        attempts = client.executions(cancelled.id)
    assert dead.status == "cancelled"
    assert dead.last_error == f"parent job {extract.id} ended dlq"
    assert [(a.outcome, a.error) for a in attempts] == [("cancelled", f"parent job {extract.id} ended dlq")]
    assert ran == ["cleanup"]


def test_a_fan_in_reads_what_each_parent_returned() -> None:
    read: list[dict[str, object]] = []
    jobs = JobTypes()

    @jobs.handler("count", max_attempts=1)
    def count(payload: Step, ctx: HandlerContext) -> dict[str, object]:
        if ctx.parents:
            read.append(ctx.parent_results())
            return {"total": sum(int(r["rows"]) for r in ctx.parent_results().values() if isinstance(r, dict))}
        return {"rows": len(payload.name)}

    with testing.embedded(jobs) as client:
        parts = [client.enqueue(count, Step("x" * n)) for n in range(1, 5)]
        total = client.enqueue(count, Step("total"), depends_on=parts)
        assert client.wait(total.id, timeout=30).result == {"total": 1 + 2 + 3 + 4}
    assert read == [{part.id: {"rows": n} for n, part in enumerate(parts, start=1)}]
