"""What a job's stored fields become at each transition, decided once for every store.

The stores (mongo/, sqlite/) differ in how they guard and apply a change (a filtered update on MongoDB,
a compare-and-set inside one transaction on SQLite); what the change *is* lives here, so the retry rule, the
DLQ rule and the shape of a template's run cannot drift apart between them. Every function returns the
fields to write, named as on the job document (camelCase), with statuses and outcomes as their string values.
A value of UNSET means "remove the field" (Mongo `$unset`, SQL NULL): it reads back as None either way.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from jobsched.backoff import retry_delay
from shared.model import CANCELLABLE, JOB_FIELDS, TERMINAL, Job, Outcome, Status, run_key
from shared.store.base import ActiveRuns, AttemptResult, NewJob, RunSpec, TransitionRefused

Fields = dict[str, Any]

KIND_RUN: Final = "run"
KIND_TEMPLATE: Final = "template"
# A buffered run is of its own kind until it is promoted: claims (kind run) pass over it without looking at its
# status, and the scheduler finds the buffered runs through the kind, which every store indexes.
KIND_BUFFERED: Final = "buffered"

# The statuses of a job whose current attempt is in an executor's hands (heartbeats, reaper, results).
ATTEMPT_ACTIVE: Final = (Status.CLAIMED.value, Status.RUNNING.value)
CANCELLABLE_VALUES: Final = tuple(sorted(s.value for s in CANCELLABLE))
# The attempts a job's history lists: its last ones (a job retried without end stays a bounded record).
HISTORY_KEPT: Final = 20


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset()


def attempt_record_id(job_id: str, attempt: int) -> str:
    """The id of attempt `attempt`'s record (its entry in a job's history on MongoDB)."""
    return f"{job_id}:{attempt}"


# --- jobs -------------------------------------------------------------------------------------------------


def stored_time(moment: datetime) -> datetime:
    """A time as every store keeps it: UTC, millisecond precision (so what create returns equals what get reads)."""
    utc = moment.astimezone(UTC)
    return utc.replace(microsecond=utc.microsecond // 1000 * 1000)


_NEW_JOB_FIELDS: Final = tuple(f.name for f in fields(NewJob))


def new_job(new: NewJob, now: datetime) -> Fields:
    """A fresh pending job, or a waiting one when it has parents (fields the client left out are omitted).
    `kind` separates runs from templates, so the claim query never has to look at cron/interval."""
    # The fields as they are (asdict would deep-copy the payload, most of a create's cost): the job's document
    # shares the request's payload, which nothing changes afterwards.
    doc: Fields = {k: v for k in _NEW_JOB_FIELDS if (v := getattr(new, k)) is not None}
    doc["scheduledAt"] = stored_time(new.scheduledAt)
    if new.plannedAt is not None:
        doc["plannedAt"] = stored_time(new.plannedAt)
    if new.dependsOn:  # ids as every store keeps them (an ObjectId's lower-case hex), each once
        doc["dependsOn"] = list(dict.fromkeys(parent.lower() for parent in new.dependsOn))
    now = stored_time(now)
    doc.update(
        status=Status.WAITING.value if new.dependsOn else Status.PENDING.value,
        attempts=0,
        kind=KIND_TEMPLATE if new.cron or new.interval else KIND_RUN,
        createdAt=now,
        updatedAt=now,
    )
    return doc


def template_run(template: Job, run: RunSpec, now: datetime) -> Fields:
    """The one-off run a template spawns (for a fire time, a trigger or a backfill); its key makes the insert
    idempotent. The run keeps its own copy of the template's payload and settings."""
    doc: Fields = {
        "idempotencyKey": run.key or run_key(template.idempotencyKey, run.planned),
        "tenantId": template.tenantId,
        "jobType": template.jobType,
        "payload": template.payload if run.payload is None else run.payload,
        "priority": template.priority,
        "maxAttempts": template.maxAttempts,
        "scheduledAt": stored_time(run.scheduledAt or run.planned),
        "plannedAt": stored_time(run.planned),
        "templateId": template.id,
        "status": run.status.value,
        "attempts": 0,
        "kind": KIND_BUFFERED if run.status is Status.BUFFERED else KIND_RUN,
        "createdAt": now,
        "updatedAt": now,
    }
    if template.backoff is not None:
        doc["backoff"] = template.backoff
    if template.timeoutSeconds is not None:
        doc["timeoutSeconds"] = template.timeoutSeconds
    if template.concurrencyKey is not None:
        doc["concurrencyKey"] = template.concurrencyKey
    if template.traceparent is not None:  # its attempts' spans link to the template's (shared/tracing/spans.py)
        doc["traceparent"] = template.traceparent
    return doc


def promoted(now: datetime) -> Fields:
    """buffered → pending, due now: the template's previous run has ended."""
    return {"status": Status.PENDING.value, "kind": KIND_RUN, "scheduledAt": now, "updatedAt": now}


def queued(now: datetime) -> Fields:
    """pending → queued by the scheduler; queuedAt is what the reaper's stale-queued sweep measures."""
    now = stored_time(now)
    return {"status": Status.QUEUED.value, "queuedAt": now, "updatedAt": now}


def requeued(now: datetime) -> Fields:
    """queued → pending (wake-up not published, or lost): back in line at its old scheduledAt."""
    return {"status": Status.PENDING.value, "updatedAt": now, "queuedAt": UNSET}


def template_fired(
    last_fired: datetime | None, next_at: datetime | None, remaining_runs: int | None, now: datetime
) -> Fields:
    """A template after its due fire times were handled: its cursor moves on to `next_at` (None: its
    schedule is over, it completes), lastFiredAt to the last time handled, remainingRuns down by the runs."""
    fields: Fields = {"updatedAt": now}
    if last_fired is not None:
        fields["lastFiredAt"] = last_fired
    if remaining_runs is not None:
        fields["remainingRuns"] = remaining_runs
    return {**fields, **template_rescheduled(next_at, now)}


def template_rescheduled(next_at: datetime | None, now: datetime) -> Fields:
    """A template's next fire time set anew (update, resume); with none left, the template completes."""
    if next_at is None:
        return {"status": Status.COMPLETED.value, "updatedAt": now}
    return {"scheduledAt": next_at, "updatedAt": now}


def template_paused(note: str | None, now: datetime) -> Fields:
    return {"paused": True, "pausedAt": now, "pauseNote": note if note else UNSET, "updatedAt": now}


def template_resumed(next_at: datetime | None, now: datetime) -> Fields:
    """Unpaused, continuing at its first fire time after now: the times that passed while paused never run."""
    fields: Fields = {"paused": False, "pauseNote": UNSET, "pausedAt": UNSET, "resumedAt": now}
    return {**fields, **template_rescheduled(next_at, now)}


def template_dead_lettered(reason: str, now: datetime) -> Fields:
    return {"status": Status.DLQ.value, "lastError": reason, "updatedAt": now}


def cancelled(now: datetime) -> Fields:
    return {"status": Status.CANCELLED.value, "updatedAt": now}


def cancel_requested(now: datetime) -> Fields:
    """A running job asked to stop: the attempt's end decides the rest (attempt_closed)."""
    return {"cancelRequested": True, "updatedAt": now}


def started(worker: str, now: datetime, lease_until: datetime) -> Fields:
    """queued → running by the executor whose start moved the job first, its lease running until
    `lease_until` (extended by extend_leases)."""
    now = stored_time(now)
    return {
        "status": Status.RUNNING.value,
        "claimedBy": worker,
        "claimedAt": now,
        "leaseExpiresAt": stored_time(lease_until),
        "updatedAt": now,
        "progress": UNSET,  # the last attempt's; this one reports its own
    }


def attempt_closed(job: Job, closing: AttemptResult) -> Fields:
    """The job fields after attempt `job.next_attempt` closed as `closing` says: completed on success (with the
    handler's result, if any); otherwise attempts+1 and either pending again after the job's backoff (its type's
    when it was created, whoever closes the attempt), or dlq once the budget (since the last re-drive) is spent or
    the handler gave up, or cancelled when the attempt was cancelled or the job's cancellation requested. A snooze
    is pending again after its delay, its attempt not spent: attemptBase moves with attempts (attempt numbers stay
    unique)."""
    outcome, at = closing.outcome, closing.finishedAt
    if outcome is Outcome.SUCCEEDED:
        fields: Fields = {"status": Status.COMPLETED.value, "updatedAt": at}
        if closing.result is not None:
            fields["result"] = closing.result
        return fields
    attempts = job.attempts + 1
    fields = {"attempts": attempts, "updatedAt": at}
    if outcome is Outcome.SNOOZED and not job.cancelRequested:
        assert closing.snooze is not None, "a snooze says for how long"
        fields.update(
            status=Status.PENDING.value,
            attemptBase=job.attemptBase + 1,
            snoozes=(job.snoozes or 0) + 1,
            scheduledAt=at + closing.snooze,
        )
        return fields
    fields["lastError"] = closing.error or outcome.value
    if closing.result is not None:
        fields["result"] = closing.result
    if outcome in (Outcome.CANCELLED, Outcome.SNOOZED) or job.cancelRequested:
        fields["status"] = Status.CANCELLED.value  # a job whose cancellation was asked for is never retried
    elif closing.final or job.budget_spent_after(attempts):
        fields["status"] = Status.DLQ.value
    else:
        fields["status"] = Status.PENDING.value
        fields["scheduledAt"] = at + max(retry_delay(attempts, job.retry_backoff), closing.retry_after or timedelta(0))
    return fields


def redriven(job: Job, now: datetime) -> Fields:
    """dlq → pending, due now, with a fresh budget counted from the attempts made so far."""
    return {"status": Status.PENDING.value, "attemptBase": job.attempts, "scheduledAt": now, "updatedAt": now}


def applied(job: Job, fields: Fields) -> Job:
    """`job` as stored after a write of `fields` that moved it, as a read would return it (times at the stored
    precision): what a store returns without reading it back, for less than converting the stored row."""
    changes: Fields = {}
    for key, value in fields.items():
        if key in JOB_FIELDS:
            changes[key] = None if value is UNSET else stored_time(value) if isinstance(value, datetime) else value
    if "status" in changes:
        changes["status"] = Status(str(changes["status"]))
    return job.evolve(**changes)


def claim_order(job: Job) -> tuple[int, datetime, str]:
    """The order claims hand jobs out in: priority desc, then scheduledAt asc (then id, for a total order)."""
    return (-job.priority, job.scheduledAt, job.id)


# --- preconditions shared by the stores' read-then-write operations ---------------------------------------


def check_cancellable(job: Job) -> None:
    """Cancellable now (pending, queued, buffered), or by request (claimed, running); finished jobs are not."""
    if job.status in TERMINAL:
        raise TransitionRefused(job, "cancel")


def check_startable(job: Job, job_type: str) -> None:
    """Only a queued job of the executor's own type starts (anything else is not this wake-up's attempt)."""
    if job.jobType != job_type or job.status is not Status.QUEUED:
        raise TransitionRefused(job, "start")


def check_deletable(job: Job) -> None:
    """Only a finished job is deleted: one underway still has an owner, or will have."""
    if job.status not in TERMINAL:
        raise TransitionRefused(job, "delete")


def check_runs_ended(template: Job, run_statuses: Iterable[str]) -> None:
    """A template is deleted with its runs only when every run has ended: one underway would lose its record."""
    active = sum(Status(status) not in TERMINAL for status in run_statuses)
    if active:
        raise ActiveRuns(template, active)


def check_ages_out(status: Status) -> None:
    """Only jobs that ended are deleted by their age (retention); any other is still someone's to finish."""
    if status not in TERMINAL:
        raise ValueError(f"only finished jobs are deleted by age, not {status.value} ones")


def check_redrivable(job: Job) -> None:
    if job.status is not Status.DLQ or job.is_template:
        raise TransitionRefused(job, "retry")


# --- attempts (one record per attempt, `<jobId>:<n>`) ------------------------------------------------------
# Ownership of an attempt is decided on its job alone (a start moves it queued -> running only while it is queued
# with n-1 attempts made; an outcome moves it on only while it is still in attempt n). Its record is written by
# the write that decides its outcome; until then the attempt is its job's own fields (open_attempt).


def open_attempt(attempt: int, worker: str | None, started_at: datetime | None) -> Fields:
    """The attempt a job in an executor's hands (claimed or running) is in, as its job's fields list it (an
    Execution's fields but its ids) until its outcome is decided and its record written."""
    return {"attempt": attempt, "outcome": Outcome.RUNNING, "worker": worker, "startedAt": started_at}


def attempt_record(job: Job, closing: AttemptResult) -> Fields:
    """Attempt `job.next_attempt` as `closing` ended it: its whole record (the id is added by the store). Who ran
    it and when it started are the job's (claimedBy, claimedAt: the store's time of the start, which start rates
    count), the closer's start only for a job that has none; its duration is the closer's (the handler's own)."""
    record: Fields = {"attempt": job.next_attempt, **attempt_result(closing)}
    if job.claimedBy is not None:
        record["worker"] = job.claimedBy
    started_at = job.claimedAt or closing.startedAt
    if started_at is not None:
        record["startedAt"] = started_at
    return record


def attempt_cancelled(now: datetime) -> Fields:
    """The record of the attempt a cancellation took from the executors (`job.next_attempt`, never to run)."""
    return {"outcome": Outcome.CANCELLED.value, "finishedAt": now}


def attempt_result(closing: AttemptResult) -> Fields:
    """An attempt's one outcome, as its record keeps it."""
    record: Fields = {"outcome": closing.outcome.value, "finishedAt": closing.finishedAt, "error": closing.error}
    if closing.traceback is not None:
        record["traceback"] = closing.traceback
    if closing.result is not None:
        record["result"] = closing.result
    if closing.duration_ms is not None:
        record["durationMs"] = closing.duration_ms
    return record
