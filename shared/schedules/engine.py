"""Schedules applied to a store: fire due templates, start buffered runs, trigger, backfill, pause, resume.

Used by the scheduler (fire_due, start_buffered) and by the API (the rest). What to do is decided by the pure
functions of policy.py and spec.py; this module reads what they need and writes what they decide.

Why it is safe across crashes and overlapping leaders: every run of a fire time is keyed
`<templateKey>-run-<planned unix ns>`, so repeating a decision (a new leader, a retried backfill) inserts
nothing twice; the template's cursor (scheduledAt, lastFiredAt) moves with a compare-and-set on the cursor
it was read with, so two leaders cannot both move it. Buffered runs are stored runs in status `buffered`,
so a leader that dies with runs waiting loses none of them: the next one starts them in order.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.cron import ScheduleError
from shared.model import NOT_FINAL, Job, Status, format_time, run_key
from shared.schedules.policy import Action, ActiveRun, Decision, Overlap, OverlapPlan, decide_overlap, limit_runs
from shared.schedules.spec import MAX_BACKFILL, Due, TemplateSpec
from shared.schedules.workflow_runs import WorkflowRuns, check_changes, check_overlap, is_workflow_schedule
from shared.store import transitions
from shared.store.base import (
    JobNotFound,
    RunSpec,
    ScheduleStore,
    StoreError,
    TransitionRefused,
)

log = logging.getLogger("jobsched.schedules")
# Runs of one template that the overlap policies look at; more not-final runs than this is a backlog that
# the policies would refuse anyway (skip, buffer_one) or only append to (buffer_all).
ACTIVE_LOOKUP = 1000
BUFFERED_PER_TICK = 500
FAILURES_LOOKUP = 20
UPDATE_TRIES = 5
NOT_STARTED_OR_BUFFERED = frozenset(NOT_FINAL - {Status.BUFFERED})


class ScheduleRefused(StoreError):
    """The request conflicts with the template's state (HTTP 409); the message says why."""


@dataclass(frozen=True)
class Triggered:
    run: Job
    created: bool


@dataclass(frozen=True)
class Backfilled:
    spawned: int
    existing: int
    skipped: int


class ScheduleEngine:
    def __init__(self, store: ScheduleStore) -> None:
        self._store = store
        self._workflow_runs = WorkflowRuns(store)

    # --- scheduler ----------------------------------------------------------------------------------------

    def fire_due(self, template: Job, now: datetime) -> Counter[Action]:
        """Handle the template's fire times up to `now`: decide each (catch-up, overlap, runs left), write
        the runs, then move the template's cursor past them. Raises ScheduleError when the template no
        longer parses (the caller dead-letters it)."""
        spec = TemplateSpec.of(template)
        actions: Counter[Action] = Counter()
        if spec.pause_on_failure and self._pause_after_failure(template, now):
            return actions
        due = spec.due(template.scheduledAt, now)
        actions[Action.MISSED] += due.missed
        plan = self._plan(template, spec.overlap, due.run)
        decisions, used_up = limit_runs(plan.decisions, spec.remaining_runs)
        self._cancel(plan.cancel)
        created = self._write_runs(template, spec, decisions)
        for decision in decisions:
            actions[decision.action] += 1
        self._advance(template, spec, due, created, ended=due.ended or used_up, now=now)
        return actions

    def start_buffered(self, now: datetime) -> int:
        """Make each template's oldest buffered run pending once no other run of the template is pending,
        queued or running (and the template is not paused). The buffered runs of a cancelled template are
        cancelled. Return how many started."""
        waiting: dict[str, list[Job]] = {}
        for run in self._store.buffered_runs(BUFFERED_PER_TICK):
            if run.templateId is not None:
                waiting.setdefault(run.templateId, []).append(run)
        started = 0
        for template_id, buffered in waiting.items():
            template = self._store.get(template_id)
            if template is None or template.status is Status.CANCELLED:
                self._cancel(r.id for r in buffered)
                continue
            if template.paused or self._store.template_runs(template_id, NOT_STARTED_OR_BUFFERED, 1):
                continue
            if template.pauseOnFailure and self._pause_after_failure(template, now):
                continue
            if self._store.promote_buffered(buffered[0], now):
                started += 1
                log.info(
                    "buffered run started",
                    extra={"action": "buffered_run_started", "jobId": buffered[0].id, "templateId": template_id},
                )
        return started

    def _pause_after_failure(self, template: Job, now: datetime) -> bool:
        """With pauseOnFailure: pause the template if one of its runs ended in the DLQ since it was created or
        last resumed; True when it is (now) paused."""
        since = template.resumedAt or template.createdAt
        failed = [
            r for r in self._store.template_runs(template.id, [Status.DLQ], FAILURES_LOOKUP) if r.updatedAt >= since
        ]
        if not failed:
            return False
        run = failed[0]
        note = f"paused on failure: run {run.id} ended in the DLQ: {run.lastError or 'failed'}"
        paused = self._store.update_if_unmoved(template, transitions.template_paused(note, now))
        log.warning("template paused on failure", extra={"action": "template_paused", "jobId": template.id})
        return paused is not None or template.paused is True

    # --- API ------------------------------------------------------------------------------------------------

    def trigger(
        self,
        template: Job,
        now: datetime,
        *,
        payload: dict[str, Any] | None = None,
        overlap: Overlap | None = None,
        request_key: str | None = None,
    ) -> Triggered:
        """One run now, keyed `<templateKey>-trigger-<request key>` (a fresh key per request when none is
        given), under the template's overlap policy or `overlap`. A retried request with the same key
        returns the run it made. Raises ScheduleRefused when the policy refuses the run."""
        self._check_template(template)
        key = f"{template.idempotencyKey}-trigger-{request_key or uuid.uuid4().hex}"
        if request_key is not None:
            if is_workflow_schedule(template):
                earlier = self._workflow_runs.earlier(template, key)
            else:
                earlier = self._store.job_by_key(template.tenantId, key)
            if earlier is not None and earlier.templateId == template.id:
                return Triggered(earlier, False)  # a retry: its run, whatever the policy says now
        policy = overlap or TemplateSpec.of(template).overlap
        plan = self._plan(template, policy, [now])
        decision = plan.decisions[0]
        if decision.action is Action.SKIPPED:
            raise ScheduleRefused(f"overlap policy {policy.value}: run {plan.blocking} of this template is not final")
        self._cancel(plan.cancel)
        status = Status.BUFFERED if decision.action is Action.BUFFERED else Status.PENDING
        spec = RunSpec(now, key=key, status=status, payload=payload)
        if is_workflow_schedule(template):
            [(run_id, created)] = self._workflow_runs.add(template, [spec], refuse_foreign=True)
            run = self._store.get(run_id)
            if run is None:  # its first step's job aged out: that trigger is history
                raise ScheduleRefused(f"the run of trigger key {key!r} was deleted by retention; use another key")
            return Triggered(run, created)
        run, created = self._store.add_run(template, spec)
        return Triggered(run, created)

    def backfill(self, template: Job, start: datetime, end: datetime, overlap: Overlap | None = None) -> Backfilled:
        """One run per fire time in [start, end), keyed like scheduled runs, decided by the overlap policy as
        if the times came one after another. Raises ScheduleError past MAX_BACKFILL fire times."""
        self._check_template(template)
        if end <= start:
            raise ScheduleError("'to' must be after 'from'")
        spec = TemplateSpec.of(template)
        times = spec.between(start, end, MAX_BACKFILL)
        plan = self._plan(template, overlap or spec.overlap, times)
        self._cancel(plan.cancel)
        spawning = plan.runs()
        created = sum(created for _, created in self._add(template, spec, spawning, refuse_foreign=True))
        return Backfilled(spawned=created, existing=len(spawning) - created, skipped=len(times) - len(spawning))

    def pause(self, template: Job, note: str | None, now: datetime) -> Job:
        self._check_template(template)
        return self._update(template, lambda current: transitions.template_paused(note, now))

    def resume(self, template: Job, now: datetime) -> Job:
        """Unpause; the template continues at its first fire time after now (none of the passed ones run)."""
        self._check_template(template)
        spec = TemplateSpec.of(template)

        return self._update(template, lambda current: transitions.template_resumed(spec.next_fire(now), now))

    def update_template(self, template: Job, changes: dict[str, Any], now: datetime) -> Job:
        """Apply a PATCH to a template: validate the merged schedule and policy, recompute the next fire time
        (from now, or from the last one handled if that is later). Runs spawned already keep their copy."""
        self._check_template(template)
        merged = template.evolve(**{k: None if v is transitions.UNSET else v for k, v in changes.items()})
        spec = TemplateSpec.of(merged, lenient=False)  # ScheduleError: 400; what is changed is new input
        if is_workflow_schedule(template):
            check_overlap(spec.overlap.value)
            check_changes(changes)
        next_at = spec.next_fire(now)
        return self._update(template, lambda current: {**changes, **transitions.template_rescheduled(next_at, now)})

    # --- shared steps ---------------------------------------------------------------------------------------

    def _plan(self, template: Job, overlap: Overlap, times: list[datetime]) -> OverlapPlan:
        """Decide `times` against the template's runs that are not final, leaving out runs of these very
        times: they are this decision's own runs, written before a crash, not earlier ones. ScheduleError for an
        overlap a workflow schedule cannot keep (a trigger's or a backfill's own)."""
        if is_workflow_schedule(template):
            check_overlap(overlap.value)
        if not times:
            return OverlapPlan([])
        active: list[ActiveRun] = []
        if overlap is not Overlap.ALLOW_ALL:
            planned = set(times)
            runs = self._store.template_runs(template.id, NOT_FINAL, ACTIVE_LOOKUP)
            if is_workflow_schedule(template):  # a run left half written would hold the schedule back until reaped
                self._workflow_runs.finish_half_written(template, runs)
            active = [ActiveRun(r.id, r.status) for r in reversed(runs) if r.plannedAt not in planned]
        return decide_overlap(overlap, times, active)

    def _cancel(self, run_ids: Iterable[str]) -> None:
        for run_id in run_ids:
            try:
                job = self._store.cancel(run_id)
            except (TransitionRefused, JobNotFound):
                continue  # ended meanwhile: nothing left to cancel
            log.info(
                "earlier run cancelled (cancel_other)",
                extra={"action": "run_cancel_requested", "jobId": run_id, "status": job.status.value},
            )

    def _write_runs(self, template: Job, spec: TemplateSpec, decisions: list[Decision]) -> int:
        """Insert the runs of the decisions; return how many exist for them now (new or from before)."""
        creating = [d for d in decisions if d.creates_run]
        for decision, (run_id, created) in zip(creating, self._add(template, spec, creating), strict=True):
            if created:
                log.info(
                    "run spawned",
                    extra={
                        "action": "cron_run_spawned" if decision.action is Action.SPAWNED else "cron_run_buffered",
                        "jobId": template.id,
                        "runId": run_id,
                        "tenantId": template.tenantId,
                        "planned": format_time(decision.planned),
                    },
                )
        return len(creating)

    def _add(
        self, template: Job, spec: TemplateSpec, decisions: list[Decision], *, refuse_foreign: bool = False
    ) -> list[tuple[str, bool]]:
        """The decisions' runs, written by one store call: their ids, and whether each is new (`refuse_foreign`: see
        WorkflowRuns.add)."""
        runs = []
        for decision in decisions:
            key = run_key(template.idempotencyKey, decision.planned)
            status = Status.BUFFERED if decision.action is Action.BUFFERED else Status.PENDING
            runs.append(RunSpec(decision.planned, status=status, scheduledAt=spec.run_at(key, decision.planned)))
        if is_workflow_schedule(template):
            return self._workflow_runs.add(template, runs, refuse_foreign=refuse_foreign)
        return self._store.add_runs(template, runs) if runs else []

    def _advance(self, template: Job, spec: TemplateSpec, due: Due, runs: int, *, ended: bool, now: datetime) -> None:
        remaining = max(spec.remaining_runs - runs, 0) if spec.remaining_runs is not None else None
        next_at = None if ended else due.next_at
        fields = transitions.template_fired(due.handled_until, next_at, remaining, now)
        self._store.update_if_unmoved(template, fields)  # None: another leader (or an update) moved it first

    def _update(self, template: Job, fields_for: Callable[[Job], dict[str, Any]]) -> Job:
        """update_if_unmoved with retries: the scheduler may move the template's cursor between read and write."""
        current: Job | None = template
        for _ in range(UPDATE_TRIES):
            assert current is not None
            if current.status is not Status.PENDING:
                raise TransitionRefused(current, "change")
            updated = self._store.update_if_unmoved(current, fields_for(current))
            if updated is not None:
                return updated
            current = self._store.get(template.id)
            if current is None:
                raise TransitionRefused(template, "change")
        raise ScheduleRefused(f"template {template.id} kept changing; retry")

    def _check_template(self, job: Job) -> None:
        if not job.is_template:
            raise ScheduleRefused(f"job {job.id} is not a recurring template")
        if job.status is not Status.PENDING:
            raise TransitionRefused(job, "change the schedule of")
