"""Workflows: steps (jobs) that wait for one another, made in one request, built with a WorkflowBuilder.

    flow = client.workflow("etl-2026-12-06", name="nightly-etl")
    extract = flow.step("extract", extract_rows, Day("2026-12-06"))
    parts = flow.group(*(flow.step(f"transform-{i}", transform, Part(i)) for i in range(3)))
    load = flow.step("load", "load", {"table": "facts"})
    flow.chain(extract, parts, load)  # extract, then the three transforms side by side, then load
    workflow = flow.submit()  # AsyncClient: await flow.submit()

Nothing is sent until `submit`. The same builder is used by Client and AsyncClient: only what `submit` returns
differs (a Workflow, or an awaitable of one). `schedule(cron=...)` instead makes a schedule that fires the workflow
at each of its times (a template, returned as a Job; docs/workflows.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise
from typing import Any, Generic, Literal, TypedDict, TypeVar, Unpack, overload
from uuid import uuid4

from jobsched.client import _calls
from jobsched.client._calls import Call
from jobsched.client.models import Job, Workflow
from jobsched.handlers import JobType

P = TypeVar("P")
R = TypeVar("R")
S = TypeVar("S")


@dataclass(frozen=True)
class StepRef:
    """A step added to a WorkflowBuilder (what `step` returns): give it in another step's `after`, or to
    `chain`, `group` and `fan_in`. Its name is what the workflow's steps and the step's job are known by."""

    name: str
    job_type: str


@dataclass(frozen=True)
class StepGroup:
    """Steps that run side by side (none waits for another), made by `WorkflowBuilder.group`: a link of `chain`
    (the next link waits for all of them), the parents of `fan_in`, or a step's `after`."""

    steps: tuple[StepRef, ...]

    def __iter__(self) -> Iterator[StepRef]:
        return iter(self.steps)

    def __len__(self) -> int:
        return len(self.steps)


class StepOptions(TypedDict, total=False):
    """The optional arguments of `WorkflowBuilder.step`: the step's job's, as a job's in `create`."""

    # What a parent ending dlq or cancelled does to this step: cancel it (default) or run it all the same; only
    # for a step with `after`.
    on_parent_failure: Literal["cancel", "run"] | None
    priority: int | None
    max_attempts: int | None
    timeout_seconds: float | None
    concurrency_key: str | None


_WIRE_OPTIONS = {
    "on_parent_failure": "onParentFailure",
    "priority": "priority",
    "max_attempts": "maxAttempts",
    "timeout_seconds": "timeoutSeconds",
    "concurrency_key": "concurrencyKey",
}


class WorkflowBuilder(Generic[R, S]):
    """A workflow being put together: `client.workflow(...)` makes one, `step` adds steps (typed like `enqueue`
    when given a JobType), `chain`, `group` and `fan_in` say which wait for which, and `submit` sends it all in
    one request, returning what the client's calls return: a Workflow (Client), an awaitable of one
    (AsyncClient). Nothing is sent before `submit`.

    The idempotency key (generated when not given) is the builder's: submitting again after a failure cannot
    make the workflow twice. Steps are checked as the API checks them (names unique, `after` naming steps of
    this workflow, no cycle) when the body is built, so a mistake is a ValueError before anything is sent."""

    def __init__(
        self,
        send: Callable[[Call[Workflow]], R],
        send_schedule: Callable[[Call[Job]], S],
        idempotency_key: str | None = None,
        *,
        name: str | None = None,
        tenant_id: str | None = None,
        scheduled_at: datetime | str | None = None,
    ) -> None:
        self._send = send
        self._send_schedule = send_schedule
        self.idempotency_key = idempotency_key or f"workflow-{uuid4().hex}"
        self.name = name
        self.tenant_id = tenant_id
        self.scheduled_at = scheduled_at
        # Each step's body without `after`, which chain and fan_in add to after the step is made.
        self._steps: dict[str, dict[str, Any]] = {}
        self._after: dict[str, list[str]] = {}

    @overload
    def step(
        self,
        name: str,
        job_type: JobType[P, Any],
        payload: P,
        *,
        after: StepRef | str | Iterable[StepRef | str] = (),
        **options: Unpack[StepOptions],
    ) -> StepRef: ...

    @overload
    def step(
        self,
        name: str,
        job_type: str,
        payload: dict[str, Any] | None = None,
        *,
        after: StepRef | str | Iterable[StepRef | str] = (),
        **options: Unpack[StepOptions],
    ) -> StepRef: ...

    def step(
        self,
        name: str,
        job_type: JobType[Any, Any] | str,
        payload: Any = None,
        *,
        after: StepRef | str | Iterable[StepRef | str] = (),
        **options: Unpack[StepOptions],
    ) -> StepRef:
        """Add the step `name` (unique in the workflow): a job of `job_type` with `payload`. Given a JobType of a
        JobTypes collection, the payload is the handler's own type (checked like `enqueue`'s); given a type's
        name, a dict. `after`: the steps it waits for (StepRefs or names, of steps added before or after this
        one); a step without any is due at the workflow's `scheduled_at`. See StepOptions for the rest."""
        if name in self._steps:
            raise ValueError(f"a step named {name!r} is in the workflow already: step names are unique")
        if isinstance(job_type, JobType):
            type_name, body_payload = job_type.name, job_type.encode(payload)
        else:
            type_name, body_payload = job_type, payload or {}
        body: dict[str, Any] = {"name": name, "jobType": type_name, "payload": _calls.json_payload(body_payload)}
        body |= {_WIRE_OPTIONS[k]: v for k, v in options.items() if v is not None}
        self._steps[name] = body
        self._after[name] = []
        self._wait(name, _names(after))
        return StepRef(name, type_name)

    def group(self, *steps: StepRef | str) -> StepGroup:
        """These steps (added already) as one link of `chain` or the parents of `fan_in`; it adds no ordering
        itself: steps run side by side unless one is after another."""
        return StepGroup(tuple(self._ref(step) for step in steps))

    def chain(self, *links: StepRef | str | StepGroup) -> None:
        """Each link waits for the one before it: `chain(a, group(b, c), d)` runs a, then b and c side by side,
        then d once both have completed. Steps (added already) keep what they waited for before."""
        for parents, children in pairwise([self._link(link) for link in links]):
            for child in children:
                self._wait(child.name, [parent.name for parent in parents])

    def fan_in(self, parents: StepGroup | Iterable[StepRef | str], child: StepRef | str) -> StepRef:
        """`child` waits for every one of `parents` (a chord: run the parents side by side, then the child, which
        reads their results with ctx.step_results()); returns the child."""
        ref = self._ref(child)
        self._wait(ref.name, [self._ref(parent).name for parent in parents])
        return ref

    @property
    def steps(self) -> list[StepRef]:
        """The steps added so far, in order."""
        return [StepRef(name, body["jobType"]) for name, body in self._steps.items()]

    def _request(self) -> Call[Workflow]:
        """The POST /workflows call (ValueError for steps the API would refuse)."""
        steps = [
            {**body, "after": self._after[name]} if self._after[name] else body for name, body in self._steps.items()
        ]
        return _calls.create_workflow(self.idempotency_key, self.tenant_id, self.name, self.scheduled_at, steps)

    def body(self) -> dict[str, Any]:
        """The POST /workflows body `submit` would send, checked (to look at, or to send some other way)."""
        body = self._request().body
        assert body is not None
        return body

    def submit(self) -> R:
        """Make the workflow: its steps' jobs, the first ones due at `scheduled_at` (default now). When an
        earlier try of this call made it (its answer lost), that workflow is returned; DuplicateWorkflow (409)
        when another call holds the idempotency key."""
        return self._send(self._request())

    def schedule(
        self,
        *,
        cron: str | None = None,
        interval: str | None = None,
        timezone: str | None = None,
        policy: dict[str, Any] | None = None,
    ) -> S:
        """Make a schedule that fires this workflow at each of its times instead of once now: a template of the
        built-in type `jobsched.workflow` under the builder's idempotency key, returned as a Job (paused, resumed,
        triggered and listed as any template). Each run is a workflow of these steps, due at its fire time.
        `policy`: the template's policy fields as the API spells them (overlap: allow_all or skip; catchup,
        startAt, endAt, remainingRuns, jitter, pauseOnFailure...)."""
        if (cron is None) == (interval is None):
            raise ValueError("give exactly one of cron and interval")
        if self.scheduled_at is not None:
            raise ValueError("a schedule's steps are due at each of its fire times: leave scheduled_at out")
        body = dict(self.body())
        body |= {k: v for k, v in {"cron": cron, "interval": interval, "timezone": timezone}.items() if v is not None}
        return self._send_schedule(Call("POST", "/workflows", Job.from_wire, body=body | (policy or {})))

    def _wait(self, name: str, parents: Iterable[str]) -> None:
        waits = self._after[name]
        waits += [parent for parent in dict.fromkeys(parents) if parent not in waits]

    def _ref(self, step: StepRef | str) -> StepRef:
        name = step.name if isinstance(step, StepRef) else step
        if name not in self._steps:
            raise ValueError(f"no step named {name!r} in the workflow: add it with step() first")
        return StepRef(name, self._steps[name]["jobType"])

    def _link(self, link: StepRef | str | StepGroup) -> tuple[StepRef, ...]:
        return tuple(self._ref(step) for step in link) if isinstance(link, StepGroup) else (self._ref(link),)


def _names(after: StepRef | str | Iterable[StepRef | str]) -> list[str]:
    """`after` as step names, in order (a StepRef, a name, or several)."""
    if isinstance(after, StepRef | str):
        after = [after]
    return [parent.name if isinstance(parent, StepRef) else parent for parent in after]
