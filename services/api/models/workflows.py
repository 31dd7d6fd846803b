"""POST /workflows's body, validated into a NewWorkflow: each step a POST /jobs body (checked as one, so a step
takes every option a job takes, and refuses what a job refuses) plus its name and the steps it waits for (`after`),
the steps put parents first (shared/graph.py), a step that names no step or waits in a cycle refused by name. With
`cron` or `interval`, into the template of a schedule that fires the workflow (shared/schedules/workflow_runs.py),
its schedule checked as POST /jobs checks a template's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Final

from pydantic import ConfigDict, Field

from services.api.http.errors import ApiError
from services.api.http.request_bodies import validated
from services.api.new_job import TypeDefaultsOf, batch_job
from shared import graph
from shared.cron import ScheduleError
from shared.job_requests import (
    Cron,
    Interval,
    JobRequest,
    PayloadTooLarge,
    Rfc3339,
    SchedulePolicy,
    Timezone,
    check_size,
)
from shared.jsonsafe import shorten
from shared.model import format_time, utc_now
from shared.schedules.workflow_runs import WORKFLOW_SCHEDULE, check_overlap, schedule_payload
from shared.store.base import NewJob, NewStep, NewWorkflow
from shared.workflows import MAX_STEPS

MAX_STEP_NAME: Final = 100
# What a step may not set: the workflow sets its key, tenant and parents; a step runs once (no schedule).
STEP_REFUSES: Final = frozenset(
    {"idempotencyKey", "tenantId", "dependsOn", "dependsOnKeys", "cron", "interval", "timezone"}
    | {"overlap", "catchup", "catchupWindow", "startAt", "endAt", "remainingRuns", "jitter", "pauseOnFailure"}
)


class WorkflowRequest(SchedulePolicy):
    """A workflow, or with `cron` or `interval` a schedule firing it (the policy fields as a template's)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    idempotencyKey: str = Field(min_length=1, max_length=200, description="Unique among the tenant's workflows")
    tenantId: str = Field(min_length=1, max_length=256, description="AUTH=required: the key's when omitted")
    name: str | None = Field(default=None, min_length=1, max_length=200, description="A label for people")
    scheduledAt: Rfc3339 | None = Field(default=None, description="When the first steps are due (default: now)")
    steps: list[dict[str, Any]] = Field(
        min_length=1,
        max_length=MAX_STEPS,
        description="Each a POST /jobs body of a one-off job without idempotencyKey or tenantId, with `name` and "
        "optionally `after` (the names of the steps it waits for) and `onParentFailure`",
    )
    cron: Cron = None
    interval: Interval = None
    timezone: Timezone = None

    @property
    def recurring(self) -> bool:
        return self.cron is not None or self.interval is not None


def new_workflow(data: Any, type_defaults: TypeDefaultsOf, accepts: Callable[[str], bool]) -> NewWorkflow | NewJob:
    """The workflow a body asks for, or with `cron` or `interval` the template of the schedule firing it; or the
    400 naming the first step (or field) that is wrong (`accepts`: whether a job type is known)."""
    if not isinstance(data, dict):
        raise ApiError(400, "the body must be a JSON object")
    request = validated(WorkflowRequest, data)
    if request.recurring and request.scheduledAt is not None:
        raise ApiError(400, "scheduledAt: a workflow schedule's steps are due at each of its fire times")
    policy = sorted(request.policy_fields()) + (["timezone"] if request.timezone is not None else [])
    if policy and not request.recurring:
        raise ApiError(400, f"{', '.join(policy)}: apply only to a workflow schedule (cron or interval)")
    due = format_time(request.scheduledAt or utc_now())
    steps: dict[str, tuple[int, NewJob, tuple[str, ...]]] = {}
    for index, raw in enumerate(request.steps):
        if request.recurring and "scheduledAt" in raw:
            raise ApiError(400, f"{_where(index, str(raw.get('name')))}: scheduledAt: due at each fire time")
        name, job, after = _step(index, raw, request.tenantId, due, type_defaults)
        if name in steps:
            raise ApiError(400, f"{_where(index, name)}: a step of this name comes earlier (steps[{steps[name][0]}])")
        if not accepts(job.jobType):
            raise ApiError(400, f"{_where(index, name)}: jobType: unknown jobType {shorten(job.jobType)!r}")
        steps[name] = (index, job, after)
    for name, (index, _, after) in steps.items():
        missing = next((parent for parent in after if parent not in steps), None)
        if missing is not None:
            raise ApiError(400, f"{_where(index, name)}: after: no step named {shorten(missing)!r}")
    plan = graph.rounds({name: after for name, (_, _, after) in steps.items()})
    if plan.unplaced:
        first = plan.unplaced[0]
        raise ApiError(400, f"{_where(steps[first][0], first)}: waits for itself through a cycle of `after`")
    ordered = [name for round_ in plan.rounds for name in round_]
    new = NewWorkflow(
        tenantId=request.tenantId,
        idempotencyKey=request.idempotencyKey,
        name=request.name,
        steps=tuple(NewStep(name, steps[name][1], steps[name][2]) for name in ordered),
    )
    return _schedule(data, request, new) if request.recurring else new


def _schedule(data: dict[str, Any], request: WorkflowRequest, new: NewWorkflow) -> NewJob:
    """The template of the schedule firing `new`: its schedule and policy checked as a template's (a job of no
    particular type stands in for it), its payload the workflow's steps, the template's type the built-in one."""
    scheduled = {k: data[k] for k in ("cron", "interval", "timezone", *SchedulePolicy.model_fields) if k in data}
    body = {"idempotencyKey": request.idempotencyKey, "tenantId": request.tenantId, "jobType": "-", **scheduled}
    try:
        check_overlap(request.overlap)
        template = validated(JobRequest, body).to_new_job(utc_now())
        payload = check_size(schedule_payload(new))
    except ScheduleError as exc:
        raise ApiError(400, str(exc)) from None
    except PayloadTooLarge as exc:
        raise ApiError(413, f"steps: {exc}") from None
    return replace(template, jobType=WORKFLOW_SCHEDULE, payload=payload)


def _step(
    index: int, raw: dict[str, Any], tenant: str, due: str, type_defaults: TypeDefaultsOf
) -> tuple[str, NewJob, tuple[str, ...]]:
    """A step's name, its job (as POST /jobs would make it), and the names it waits for."""
    name = raw.get("name")
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_STEP_NAME:
        raise ApiError(400, f"steps[{index}]: name: a string of 1 to {MAX_STEP_NAME} characters is required")
    refused = sorted(STEP_REFUSES & raw.keys())
    if refused:
        raise ApiError(400, f"{_where(index, name)}: {refused[0]}: a step cannot set it (the workflow does)")
    after = raw.get("after", [])
    if not isinstance(after, list) or not all(isinstance(a, str) for a in after):
        raise ApiError(400, f"{_where(index, name)}: after: a list of step names")
    body = {k: v for k, v in raw.items() if k not in ("name", "after")}
    body |= {"idempotencyKey": name, "tenantId": tenant, "scheduledAt": raw.get("scheduledAt", due)}
    if after:
        body["dependsOnKeys"] = after
    try:
        job, _ = batch_job(body, type_defaults)
    except ApiError as exc:
        raise ApiError(exc.status, f"{_where(index, name)}: {_as_step(exc.message)}") from None
    return name, job, tuple(after)


def _where(index: int, name: str) -> str:
    return f"steps[{index}] ({shorten(name)})"


def _as_step(message: str) -> str:
    """A job's error in a step's words: its parents are the steps of `after`."""
    return message.replace("dependsOnKeys", "after").replace("dependsOn and after", "after")
