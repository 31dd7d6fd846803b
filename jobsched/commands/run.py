"""Each operator command: the client call it makes and what it prints (a table, or the API's JSON)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from jobsched.client import Applied, Client, Execution, Job, JobschedError, Workflow, WorkflowStep
from jobsched.commands.batches import COMMANDS as BATCH_COMMANDS
from jobsched.commands.credentials import COMMANDS as CREDENTIAL_COMMANDS
from jobsched.commands.parser import WORKFLOW_SCAN
from jobsched.commands.render import as_json, cell, fields, table
from jobsched.commands.schedule_file import read_schedules

# `runs`: attempts started; `failed`: of the budget since the last re-drive, how much is spent (snoozes spend none).
JOB_COLUMNS = ("id", "tenantId", "jobType", "status", "runs", "failed", "scheduledAt", "lastError")
SCHEDULE_COLUMNS = ("id", "jobType", "schedule", "timezone", "status", "paused", "nextRun", "lastFiredAt")
ATTEMPT_COLUMNS = ("attempt", "outcome", "worker", "startedAt", "durationMs", "error")
WORKFLOW_COLUMNS = ("id", "tenantId", "name", "status", "steps", "counts", "createdAt")
STEP_COLUMNS = ("step", "jobId", "jobType", "status", "after")
WORKFLOW_PAGE = 50  # workflows read a request while `workflows list --status` looks for its matches


class NotSucceeded(Exception):
    """The command was carried out but what it reports is a failure (a job that ended badly, a refused
    re-drive): `shown` is printed as on success, then the message, and the exit status is 1."""

    def __init__(self, message: str, shown: str) -> None:
        super().__init__(message)
        self.shown = shown


def run(client: Client, args: argparse.Namespace) -> str:
    command: Callable[[Client, argparse.Namespace], str] = COMMANDS[args.group, args.command]
    return command(client, args)


def jobs_list(client: Client, args: argparse.Namespace) -> str:
    listed = client.list(status=args.status, limit=args.limit, job_type=args.job_type, kind=args.kind)
    return _jobs(listed, args.output)


def jobs_get(client: Client, args: argparse.Namespace) -> str:
    return _job(client.get(args.job_id), args.output)


def jobs_attempts(client: Client, args: argparse.Namespace) -> str:
    attempts = client.executions(args.job_id)
    if args.output == "json":
        return as_json([a.raw for a in attempts])
    shown = table(ATTEMPT_COLUMNS, (_attempt_row(a) for a in attempts))
    if not args.traceback:
        return shown
    tracebacks = [f"attempt {a.attempt}:\n{a.traceback.rstrip()}" for a in attempts if a.traceback]
    return "\n\n".join([shown, *tracebacks]) if tracebacks else f"{shown}\n\n(no attempt kept a traceback)"


def jobs_cancel(client: Client, args: argparse.Namespace) -> str:
    return _job(client.cancel(args.job_id), args.output)


def jobs_retry(client: Client, args: argparse.Namespace) -> str:
    return _job(client.retry(args.job_id), args.output)


def jobs_wait(client: Client, args: argparse.Namespace) -> str:
    job = client.wait(args.job_id, timeout=args.timeout)
    shown = _job(job, args.output)
    if job.status != "completed":
        raise NotSucceeded(
            f"job {job.id} ended {job.status}" + (f": {job.last_error}" if job.last_error else ""), shown
        )
    return shown


def workflows_list(client: Client, args: argparse.Namespace) -> str:
    if args.status is None:
        listed = client.workflows(limit=args.limit, before=args.before)
    else:
        listed = _workflows_in(client, args.status, args.limit, args.before)
    if args.output == "json":
        return as_json([w.raw for w in listed])
    return table(WORKFLOW_COLUMNS, (_workflow_row(w) for w in listed))


def _workflows_in(client: Client, status: str, limit: int, before: str | None) -> list[Workflow]:
    """The newest `limit` workflows in `status`, among the newest WORKFLOW_SCAN: the API has no status filter,
    so pages are read, older and older, until enough match."""
    found: list[Workflow] = []
    scanned = 0
    while len(found) < limit and scanned < WORKFLOW_SCAN:
        page = client.workflows(limit=min(max(limit, WORKFLOW_PAGE), WORKFLOW_SCAN - scanned), before=before)
        found += [w for w in page if w.status == status]
        if not page:
            break
        scanned, before = scanned + len(page), page[-1].id
    return found[:limit]


def workflows_get(client: Client, args: argparse.Namespace) -> str:
    return _workflow(client.get_workflow(args.workflow_id), args.output)


def workflows_cancel(client: Client, args: argparse.Namespace) -> str:
    return _workflow(client.cancel_workflow(args.workflow_id), args.output)


def dlq_list(client: Client, args: argparse.Namespace) -> str:
    groups = client.dead_letters()
    if args.output == "json":
        return as_json([g.raw for g in groups])
    return table(("count", "jobTypes", "error"), ((g.count, ",".join(g.job_types), g.error) for g in groups))


def dlq_retry(client: Client, args: argparse.Namespace) -> str:
    redriven: list[str] = []
    refused: list[dict[str, str]] = []
    if args.error is None:
        done = client.redrive(args.job_ids)
        redriven, refused = done.redriven, done.refused
    else:
        while True:  # one call re-drives a bounded number of a group: go on while some are left and some moved
            done = client.redrive(last_error=args.error)
            redriven += done.redriven
            refused += done.refused
            if not (done.more and done.redriven):
                break
    if args.output == "json":
        shown = as_json({"redriven": redriven, "refused": refused})
    else:
        shown = "\n".join(
            [f"re-driven: {len(redriven)}", *(f"refused: {r.get('id')}: {r.get('error')}" for r in refused)]
        )
    if refused:
        raise NotSucceeded(f"{len(refused)} of {len(redriven) + len(refused)} refused", shown)
    return shown


def schedules_list(client: Client, args: argparse.Namespace) -> str:
    templates = client.list(limit=args.limit, job_type=args.job_type, kind="template")
    if args.output == "json":
        return as_json([t.raw for t in templates])
    shown = table(SCHEDULE_COLUMNS, (_schedule_row(t) for t in templates))
    return shown if templates else f"{shown}\n{_declared_elsewhere(client, args)}".rstrip()


# Where schedules declared in code go unless the deployment sets DECLARED_SCHEDULES_TENANT (docs/schedules.md).
DECLARED_TENANT = "default"


def _declared_elsewhere(client: Client, args: argparse.Namespace) -> str:
    """For an empty listing: a hint when the tenant of declared schedules holds some this key may see (a newcomer
    declares schedules in code and lists another tenant's). Nothing when it cannot be read (another tenant's key)."""
    try:
        declared = client.list(DECLARED_TENANT, limit=args.limit, job_type=args.job_type, kind="template")
    except JobschedError:
        return ""
    in_code = [t for t in declared if t.raw.get("declaredBy") == "code" and t.tenant_id != client.tenant_id]
    if not in_code:
        return ""
    return (
        f"(none in this tenant; {len(in_code)} schedules declared in code are in tenant {DECLARED_TENANT!r}:"
        f" --tenant {DECLARED_TENANT})"
    )


def schedules_get(client: Client, args: argparse.Namespace) -> str:
    template = client.get(args.job_id)
    upcoming = client.upcoming(args.job_id, args.next) if args.next > 0 else []
    if args.output == "json":
        return as_json({**template.raw, "upcoming": [cell(t) for t in upcoming]})
    shown = dict(zip(SCHEDULE_COLUMNS, _schedule_row(template), strict=True))
    extra = {"pauseNote": template.raw.get("pauseNote"), "payload": template.payload}
    return fields([*shown.items(), *extra.items(), ("upcoming", ", ".join(cell(t) for t in upcoming))])


def schedules_runs(client: Client, args: argparse.Namespace) -> str:
    return _jobs(client.runs(args.job_id, limit=args.limit), args.output)


def schedules_pause(client: Client, args: argparse.Namespace) -> str:
    return _schedule(client.pause(args.job_id, args.note), args.output)


def schedules_resume(client: Client, args: argparse.Namespace) -> str:
    return _schedule(client.resume(args.job_id), args.output)


def schedules_trigger(client: Client, args: argparse.Namespace) -> str:
    return _job(client.trigger(args.job_id, idempotency_key=args.key), args.output)


def schedules_backfill(client: Client, args: argparse.Namespace) -> str:
    done = client.backfill(args.job_id, args.start, args.end)
    if args.output == "json":
        return as_json(vars(done))
    return fields(vars(done).items())


def schedules_apply(client: Client, args: argparse.Namespace) -> str:
    declared = read_schedules(Path(args.file))
    done = client.apply_schedules(declared, removed=args.removed, dry_run=args.dry_run)
    shown = as_json(done.raw) if args.output == "json" else _diff(done, args.removed)
    if done.conflicts:
        held = ", ".join(done.conflicts)
        raise NotSucceeded(f"{held}: held by a schedule not applied from a file, or cancelled", shown)
    return shown


def _diff(done: Applied, removed: str) -> str:
    """What applying did, as `kubectl diff` shows a change: + added, ~ changed (field: stored -> declared),
    - no longer in the file, ! left alone."""
    lines = ["dry run: nothing was changed"] if done.dry_run else []
    lines += [f"+ {name}" for name in done.added]
    lines += [f"> {name} (resumed: paused when it was dropped, given again)" for name in done.resumed]
    for name in done.changed:
        lines.append(f"~ {name}")
        lines += [
            f"    {field}: {cell(old)} -> {cell(new)}" for field, (old, new) in done.changes.get(name, {}).items()
        ]
    what = {"keep": "kept", "pause": "paused", "cancel": "cancelled"}[removed]
    lines += [f"- {name} (not in the file: {what})" for name in done.removed]
    lines += [
        f"! {name} (held by a schedule not applied from a file, or cancelled: left alone)" for name in done.conflicts
    ]
    lines += [f"= {name} (ended: its bounds leave it no fire time)" for name in done.ended]
    lines.append(f"{len(done.unchanged)} unchanged")
    return "\n".join(lines)


def _job(job: Job, output: str) -> str:
    if output == "json":
        return as_json(job.raw)
    return fields((name, job.raw.get(name)) for name in (*JOB_COLUMNS, "maxAttempts", "priority", "payload"))


def _jobs(jobs: Sequence[Job], output: str) -> str:
    if output == "json":
        return as_json([j.raw for j in jobs])
    return table(JOB_COLUMNS, (_job_row(j) for j in jobs))


def _workflow(workflow: Workflow, output: str) -> str:
    """A workflow's fields, then its steps as a table (or the API's JSON)."""
    if output == "json":
        return as_json(workflow.raw)
    shown = dict(zip(WORKFLOW_COLUMNS, _workflow_row(workflow), strict=True))
    steps = table(STEP_COLUMNS, (_step_row(step) for step in workflow.steps))
    return f"{fields([*shown.items(), ('idempotencyKey', workflow.idempotency_key)])}\n\n{steps}"


def _workflow_row(workflow: Workflow) -> list[Any]:
    counts = ",".join(f"{status}:{n}" for status, n in workflow.counts.items() if n)
    return [
        workflow.id,
        workflow.tenant_id,
        workflow.name,
        workflow.status,
        workflow.step_count,
        counts,
        workflow.created_at,
    ]


def _step_row(step: WorkflowStep) -> list[Any]:
    return [step.name, step.job_id, step.job_type, step.status, ",".join(step.after)]


def _schedule(template: Job, output: str) -> str:
    if output == "json":
        return as_json(template.raw)
    return table(SCHEDULE_COLUMNS, [_schedule_row(template)])


def _job_row(job: Job) -> list[Any]:
    return [
        job.id,
        job.tenant_id,
        job.job_type,
        job.status,
        job.runs,
        f"{job.attempts - job.attempt_base}/{job.max_attempts}",
        job.scheduled_at,
        job.last_error,
    ]


def _schedule_row(template: Job) -> list[Any]:
    schedule = f"cron {template.cron}" if template.cron else f"every {template.interval}"
    paused = bool(template.raw.get("paused"))
    return [
        template.id,
        template.job_type,
        schedule,
        template.timezone or "UTC",
        template.status,
        paused,
        template.scheduled_at if template.status == "pending" else None,
        template.raw.get("lastFiredAt"),
    ]


def _attempt_row(attempt: Execution) -> list[Any]:
    duration = None if attempt.duration_ms is None else f"{attempt.duration_ms:.0f}"
    return [attempt.attempt, attempt.outcome, attempt.worker, attempt.started_at, duration, attempt.error]


COMMANDS: dict[tuple[str, str], Callable[[Client, argparse.Namespace], str]] = {
    ("jobs", "list"): jobs_list,
    ("jobs", "get"): jobs_get,
    ("jobs", "attempts"): jobs_attempts,
    ("jobs", "cancel"): jobs_cancel,
    ("jobs", "retry"): jobs_retry,
    ("jobs", "wait"): jobs_wait,
    ("workflows", "list"): workflows_list,
    ("workflows", "get"): workflows_get,
    ("workflows", "cancel"): workflows_cancel,
    ("dlq", "list"): dlq_list,
    ("dlq", "retry"): dlq_retry,
    ("schedules", "list"): schedules_list,
    ("schedules", "get"): schedules_get,
    ("schedules", "runs"): schedules_runs,
    ("schedules", "pause"): schedules_pause,
    ("schedules", "resume"): schedules_resume,
    ("schedules", "trigger"): schedules_trigger,
    ("schedules", "backfill"): schedules_backfill,
    ("schedules", "apply"): schedules_apply,
    **BATCH_COMMANDS,
    **CREDENTIAL_COMMANDS,
}
