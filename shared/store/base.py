"""The JobStore seam: every component's only way to read or change job state.

Methods are named after the outcome a caller asks for (claim due jobs, start an attempt, finish it, recover
it...), never after a store's internal steps; each docstring is the contract that every implementation
(MongoDB, SQLite) must meet and that tests/contract checks. Ownership is decided by
inserts into unique keys (idempotency keys) and by conditional updates of one job (an attempt: a start moves the
job only while it is queued with n-1 attempts made, an outcome only while it is still in attempt n), each atomic
on every store.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from jobsched.backoff import Backoff
from jobsched.handlers import ParentResult
from jobsched.limits import Rate
from shared.model import DEFAULT_PRIORITY, Execution, Job, Outcome, Status, TemplatePolicy, format_time
from shared.store.claim_limits import ClaimLimits, InFlight
from shared.store.fair_claims import Claim

if TYPE_CHECKING:
    from shared.batches import BatchView, MemberResult
    from shared.workflows import WorkflowView

# How long a call may wait for its turn inside the store (SQLite's write lock), as a time.monotonic() deadline.
# Set by a caller that prefers a quick StoreUnavailable to a long wait (the API answers 503 instead of making
# its client queue); unset, a store waits as long as its own timeout allows.
WAIT_DEADLINE: ContextVar[float | None] = ContextVar("store_wait_deadline", default=None)


class StoreError(Exception):
    """Base of the errors a store raises on purpose."""


class StoreUnavailable(StoreError):
    """The database cannot be reached or timed out; the caller may retry later."""


class SchemaTooNew(StoreUnavailable):
    """A later jobsched migrated the database past every version this one knows: nothing is done to it (a
    downgrade is not supported). Unavailable to this process for good: a caller that retries while the database
    is down stops on it (the API's schema readiness), the others report it as they report an unreachable store."""

    def __init__(self, found: int, known: int) -> None:
        super().__init__(
            f"the database's schema is version {found}; this jobsched knows versions up to {known}: "
            f"run a jobsched that knows version {found} or later (downgrades are not supported)"
        )
        self.found = found
        self.known = known


class DuplicateJob(StoreError):
    def __init__(self, idempotency_key: str, existing_id: str | None = None) -> None:
        super().__init__(f"a job with idempotencyKey {idempotency_key!r} already exists")
        self.idempotency_key = idempotency_key
        self.existing_id = existing_id  # the job that holds the key (None if it could not be read)


class JobRefused(StoreError):
    """The database cannot hold the job as given (a value or a key its documents cannot carry); nothing was
    stored. The message says why, for the client."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the job store cannot hold this job: {reason}")


class DependencyRefused(JobRefused):
    """A job's dependsOn names a job it cannot wait for (not found in its tenant, or a template): nothing was
    stored. HTTP 400, as every JobRefused; the message names the parent."""

    def __init__(self, reason: str) -> None:
        StoreError.__init__(self, f"dependsOn: {reason}")


class JobNotFound(StoreError):
    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id} not found")
        self.job_id = job_id


class WorkflowNotFound(StoreError):
    def __init__(self, workflow_id: str) -> None:
        super().__init__(f"workflow {workflow_id} not found")
        self.workflow_id = workflow_id


class BatchNotFound(StoreError):
    def __init__(self, batch_id: str) -> None:
        super().__init__(f"batch {batch_id} not found")
        self.batch_id = batch_id


class BatchSealed(StoreError):
    """Members cannot be added to a sealed batch (HTTP 409)."""

    def __init__(self, batch_id: str) -> None:
        super().__init__(f"batch {batch_id} is sealed: no member can be added to it")


class DuplicateBatch(StoreError):
    def __init__(self, idempotency_key: str, existing_id: str) -> None:
        super().__init__(f"a batch with idempotencyKey {idempotency_key!r} already exists")
        self.idempotency_key = idempotency_key
        self.existing_id = existing_id


class AttemptTaken(StoreError):
    """Another executor (or a cancellation) already owns this attempt: skip the delivery."""


class RateLimited(StoreError):
    """The job type's start rate has no start left now: the job stays queued, and may start at `until`."""

    def __init__(self, job_type: str, until: datetime) -> None:
        super().__init__(f"job type {job_type} is at its start rate until {until.isoformat()}")
        self.until = until


class TransitionRefused(StoreError):
    """The job is not in a status that allows the requested transition."""

    def __init__(self, job: Job, action: str) -> None:
        super().__init__(f"cannot {action} job {job.id}: it is {job.status.value}")
        self.job = job


class ActiveRuns(TransitionRefused):
    """A template cannot be deleted while a run of it has not finished."""

    def __init__(self, template: Job, active: int) -> None:
        StoreError.__init__(
            self,
            f"cannot delete template {template.id}: {active} of its runs have not finished (cancel or await them)",
        )
        self.job = template


@dataclass(frozen=True)
class Deleted:
    """What `delete` removed: the job as it was, and for a template how many runs went with it."""

    job: Job
    runs: int = 0


@dataclass(frozen=True)
class AttemptResult:
    """How an attempt ended, whoever closes it (the executor that ran it, or the reaper's "lost"): what decides its
    record and the job's next status (transitions.attempt_closed, attempt_result). When a retry is due follows from
    this and the job alone (its backoff), so that every closer decides it alike."""

    outcome: Outcome  # SUCCEEDED, FAILED, TIMEOUT, CANCELLED or SNOOZED from an executor; LOST from the reaper
    startedAt: datetime | None  # None: not known to the closer (a lost attempt)
    finishedAt: datetime
    error: str | None = None  # one line: the job's lastError
    traceback: str | None = None  # where a handler raised, kept on the attempt's record
    result: Any = None  # JSON a store can keep (checked by the executor): on the record, and the job's
    snooze: timedelta | None = None  # SNOOZED: due again this long after the attempt ended
    final: bool = False  # FAILED or TIMEOUT without a retry: to the DLQ whatever attempts are left
    retry_after: timedelta | None = None  # FAILED: its retry no sooner than this after the end (RetryAfter)

    @classmethod
    def lost(cls, reason: str | None, at: datetime) -> AttemptResult:
        return cls(Outcome.LOST, None, at, reason)

    @property
    def duration_ms(self) -> float | None:
        if self.startedAt is None:
            return None
        return round((self.finishedAt - self.startedAt).total_seconds() * 1000, 3)


@dataclass(frozen=True)
class StartHint:
    """What a wake-up may tell the executor beyond the job id: the claim batch it came from and the attempt
    it dispatched. Lets a store start many jobs of one batch with bulk writes; never needed for safety."""

    claim: str
    attempt: int


@dataclass(frozen=True)
class AttemptStart:
    """One delivery's request to start its job's next attempt (one of start_attempts' batch)."""

    job_id: str
    job_type: str
    worker: str
    lease_until: datetime
    hint: StartHint | None = None
    rate: Rate | None = None  # the type's start rate (limits), checked by the start itself
    key_rate: Rate | None = None  # its start rate per concurrency key, checked likewise for the job's key


@dataclass(frozen=True)
class ProgressReport:
    """What a running attempt's handler last reported (ctx.report_progress), at `at`."""

    job: Job  # as its attempt started
    value: Any
    at: datetime

    def stored(self) -> dict[str, Any]:
        """The job's `progress` field for it."""
        return {"attempt": self.job.next_attempt, "value": self.value, "reportedAt": format_time(self.at)}


@dataclass(frozen=True)
class AttemptFinish:
    """One attempt's outcome to record (finish_attempt's arguments, for finish_attempts)."""

    job: Job
    result: AttemptResult


Answer = TypeVar("Answer")


def only_answer(answers: Sequence[Answer | StoreError]) -> Answer:
    """The answer of a batch call made for one request (one start through start_attempts, ...): its value, or its
    error raised."""
    [answer] = answers
    if isinstance(answer, StoreError):
        raise answer
    return answer


@dataclass(frozen=True)
class NewJob(TemplatePolicy):
    """What a client asks for; the store assigns id, status and timestamps."""

    idempotencyKey: str
    tenantId: str
    jobType: str
    scheduledAt: datetime
    payload: dict[str, Any] = field(default_factory=dict)
    priority: int = DEFAULT_PRIORITY
    maxAttempts: int = 3
    backoff: Backoff | None = None  # its type's, unless the default (model.stored_backoff): see Job
    timeoutSeconds: float | None = None
    cron: str | None = None
    interval: str | None = None
    timezone: str | None = None
    templateId: str | None = None
    plannedAt: datetime | None = None  # a workflow schedule's step: its run's fire time (workflow_runs.py)
    # The anchor of an interval schedule; the store uses its own clock when None.
    createdAt: datetime | None = None
    declaredBy: str | None = None  # a template declared with the code: see Job
    declaration: str | None = None
    concurrencyKey: str | None = None
    # The jobs of its tenant it waits for (ids; at most dependencies.MAX_PARENTS), and what a parent that ends
    # dlq or cancelled does to it: see Job.
    dependsOn: list[str] | None = None
    onParentFailure: str | None = None
    # A workflow's step (set by the store that writes the workflow), a batch's member or callback: see Job.
    workflowId: str | None = None
    step: str | None = None
    batchId: str | None = None
    callbackOf: str | None = None
    traceparent: str | None = None  # see Job


@dataclass(frozen=True)
class NewStep:
    """A step as a client asks for it: its job (its idempotency key and parents are the store's to set) and the
    names of the steps it waits for."""

    name: str
    job: NewJob
    after: tuple[str, ...] = ()


@dataclass(frozen=True)
class NewWorkflow:
    """What POST /workflows asks for, validated: `steps` parents first (every step after those it names)."""

    tenantId: str
    idempotencyKey: str
    steps: tuple[NewStep, ...]
    name: str | None = None


class DuplicateWorkflow(StoreError):
    def __init__(self, idempotency_key: str, existing_id: str) -> None:
        super().__init__(f"a workflow with idempotencyKey {idempotency_key!r} already exists")
        self.idempotency_key = idempotency_key
        self.existing_id = existing_id


@dataclass(frozen=True)
class NewBatch:
    """What POST /batches asks for, validated: the callbacks' jobs (their keys are the store's to set)."""

    tenantId: str
    idempotencyKey: str
    name: str | None = None
    onComplete: NewJob | None = None
    onSuccess: NewJob | None = None


@dataclass(frozen=True)
class RunSpec:
    """A run a template spawns: for a fire time (keyed `<templateKey>-run-<unix ns>` unless `key` is given),
    pending or buffered, at `scheduledAt` (default: the fire time), with the template's payload unless given."""

    planned: datetime
    key: str | None = None
    status: Status = Status.PENDING
    scheduledAt: datetime | None = None
    payload: dict[str, Any] | None = None


class StoreLifecycle(Protocol):
    """What every process does with its store: make its schema, check it answers, let it go."""

    def ensure_schema(self) -> None:
        """Apply the database's pending numbered migrations (its migrations.py), at every start-up; safe with
        replicas starting together. SchemaTooNew for a database a later jobsched migrated."""

    def close(self) -> None:
        """Release connections."""

    def ping(self) -> None:
        """Return if the store answers, raise StoreUnavailable otherwise."""


class WorkflowStore(Protocol):
    """Workflows (shared/workflows.py): named steps, each a job, written all or nothing and read as one."""

    def create_workflow(self, new: NewWorkflow) -> WorkflowView:
        """Store the workflow's record and its steps' jobs, all or nothing: no step's job is claimed before every
        step is stored (the roots pending, the others waiting for their parents' jobs as jobs with dependsOn do),
        and a create that fails leaves no step that can run. Raise DuplicateWorkflow naming the holder when the
        tenant has a workflow with its idempotencyKey (on a store that writes in steps, a create that finds that
        workflow still being written, a resend after a failure or a create racing it, finishes it and returns it
        instead), JobRefused (nothing kept) for a step's job the
        database cannot hold, StoreUnavailable when it could not be written (sending it again is safe: its key
        decides)."""

    def workflow(self, workflow_id: str) -> WorkflowView | None:
        """The workflow with this id, with each step's job's status (a step whose job was deleted has none), or
        None (also for an id that is not a valid ObjectId)."""

    def workflow_by_key(self, tenant_id: str, idempotency_key: str) -> WorkflowView | None:
        """The tenant's workflow with this idempotency key, or None."""

    def workflows(self, tenant_id: str, limit: int, before: str | None = None) -> list[WorkflowView]:
        """The tenant's workflows, newest first, at most `limit`, those created before the workflow `before` (a
        page after the previous page's last one); with their steps' counts by status."""


class ScheduleStore(WorkflowStore, Protocol):
    """What the schedule engine asks (shared/schedules/engine.py), for the API's schedule endpoints and for the
    scheduler's firing alike (a workflow schedule's runs are workflows: shared/schedules/workflow_runs.py)."""

    def get(self, job_id: str) -> Job | None:
        """The job with this id, or None (also for an id that is not a valid ObjectId)."""

    def cancel(self, job_id: str) -> Job:
        """pending|queued|buffered → cancelled, and return the cancelled job; claimed|running → cancelRequested set
        (the status stays): the executor stops the handler, and the attempt's end makes the job cancelled
        unless it is a success recorded first. Return the job either way.

        The cancellation of a job that has not started takes the job's next attempt record first, so an
        executor that received the job's wake-up message can never start it, whichever of the two acts first.
        A request that races the attempt's end still ends the job cancelled unless the attempt succeeded.
        Raise JobNotFound, or TransitionRefused when the job has finished.
        """

    def add_run(self, template: Job, run: RunSpec) -> tuple[Job, bool]:
        """Insert the template's run (plannedAt = run.planned) and return it with True; when a job with its
        key exists (the same fire time spawned before, a repeated trigger), return that job with False."""

    def add_runs(self, template: Job, runs: Sequence[RunSpec]) -> list[tuple[str, bool]]:
        """add_run for each of `runs` (a backfill's thousands of fire times), answered in their order by the
        run's id and whether this call created it, in one call that writes all of them unless the store fails;
        what a failure left unwritten, a repeated call writes (each run's key is its own)."""

    def job_by_key(self, tenant_id: str, idempotency_key: str) -> Job | None:
        """The tenant's job with this idempotencyKey, or None."""

    def template_runs(
        self, template_id: str, statuses: Collection[Status] | None, limit: int, after_run: Job | None = None
    ) -> list[Job]:
        """The template's runs, optionally only these statuses, newest plannedAt first (then scheduledAt, then
        id; runs without plannedAt last), at most `limit`; with `after_run`, those listed after that one (a
        page after the previous page's last run)."""

    def buffered_runs(self, limit: int) -> list[Job]:
        """Buffered runs of every template, oldest plannedAt first."""

    def promote_buffered(self, run: Job, now: datetime) -> bool:
        """buffered → pending, due `now`; False when the run is not buffered any more (cancelled, promoted)."""

    def update_if_unmoved(self, job: Job, fields: dict[str, Any]) -> Job | None:
        """Apply `fields`, one of transitions.py's named changes (template_paused, template_resumed,
        template_fired, template_rescheduled, a PATCH's), to a job that is still pending with the scheduledAt
        it was read with (a template's fire-time cursor: a compare-and-set against another leader, a pause or
        an update); the updated job, or None when it moved meanwhile and nothing was written."""


class BatchReads(Protocol):
    def batch(self, batch_id: str) -> BatchView | None:
        """The batch with this id and its members counted by status (its progress), or None (also for an id that
        is not a valid ObjectId)."""

    def batch_members(
        self, batch_id: str, after: MemberResult | None, limit: int, *, status: str | None = None, results: bool = True
    ) -> list[MemberResult]:
        """The batch's members by status then id, after the member `after` (the last of the previous page), at
        most `limit`, each with its status and result (None without `results`), only those in `status` when
        given: what a callback's handler reads (HandlerContext), and the batch's members listed (GET
        /batches/{id}/jobs)."""


class BatchStore(BatchReads, Protocol):
    """Batches (shared/batches.py): jobs of any number with callbacks when all have ended."""

    def create_batch(self, new: NewBatch) -> BatchView:
        """Store an open batch and its callbacks' jobs (held until it fires). Raise DuplicateBatch naming the holder
        when the tenant has a batch with its idempotencyKey, JobRefused (nothing stored) for a callback the
        database cannot hold."""

    def add_to_batch(self, batch_id: str, news: Sequence[NewJob]) -> list[Job | StoreError]:
        """create_many for jobs that become members of the batch (each with batchId set), answered as create_many
        answers. Raise BatchNotFound, BatchSealed for a sealed batch (nothing written); a job of another tenant than
        the batch's is refused on its own (JobRefused). Members added while a seal is under way may miss the
        batch's firing on a store that writes in steps: seal once the adds were answered."""

    def seal_batch(self, batch_id: str) -> BatchView:
        """No more members: from now on the end of the batch's last member fires it (at once when every member has
        ended already, or there are none). Sealing again changes nothing. Raise BatchNotFound."""

    def batches(self, tenant_id: str, limit: int, before: str | None = None) -> list[BatchView]:
        """The tenant's batches, newest first, at most `limit`, those created before the batch `before`."""


class ApiStore(StoreLifecycle, ScheduleStore, BatchStore, Protocol):
    """The API's: jobs as clients see them."""

    def create(self, new: NewJob) -> Job:
        """Insert a pending job. Raise DuplicateJob, naming the existing job's id, if its tenant has a job with
        its idempotencyKey (atomic under races; another tenant's job with the same key is no conflict),
        JobRefused if the database cannot hold one of its values.

        A job with `dependsOn` is inserted waiting, and its wait is settled at once against its parents as they are
        (dependencies.resolution: pending when all completed already, cancelled when one failed under the cancel
        policy); from then on each parent's end settles it again, never before every parent has ended. Raise
        DependencyRefused, storing nothing, for a parent that is not a job of the tenant or is a template."""

    def create_many(self, news: Sequence[NewJob]) -> list[Job | StoreError]:
        """create for each of `news`, answered in their order by the job or what create would raise for it
        (DuplicateJob naming the holder, which may be an earlier job of the same call; JobRefused): each job is
        created or refused on its own, never because of another, in as few writes as the store can. Raise
        StoreUnavailable when nothing was written; a job the store could not settle after others were is answered
        StoreUnavailable (sending it again is safe: its key decides)."""

    def list_executions(self, job_id: str) -> list[Execution]:
        """The job's attempt records, oldest first."""

    def in_flight_beside(self, job: Job) -> InFlight:
        """The runs of the job's type claimed and not finished (queued, claimed, running), counted by type, tenant
        and concurrency key: what its limits count (the API says which one a due job waits for)."""

    def redrive(self, job_id: str) -> Job:
        """dlq → pending, due now, with a fresh budget of maxAttempts attempts (attemptBase = attempts).
        Raise JobNotFound, or TransitionRefused for any other status."""

    def delete(self, job_id: str) -> Deleted:
        """Remove a finished job (completed, dlq or cancelled) with its attempt records, so that its idempotency
        key can be used again; a finished template goes with every run of it (their keys derive from the
        template's). Raise JobNotFound, TransitionRefused for a job not finished, ActiveRuns for a template
        with a run not finished (nothing is removed then). The removal is conditional on the status read, so a
        job re-driven or re-started meanwhile is refused, not removed."""


class SchedulerStore(StoreLifecycle, ScheduleStore, Protocol):
    """The elected scheduler's: due jobs claimed for their executors, templates fired."""

    def claim_due_jobs(
        self,
        now: datetime,
        limit: int,
        job_types: Collection[str],
        due_by: datetime | None = None,
        limits: Mapping[str, ClaimLimits] | None = None,
    ) -> Claim:
        """pending → queued (queuedAt = now) for up to `limit` runs due by `due_by` (scheduledAt <= due_by,
        default now: a claim ahead of time) of these job types. Templates are never claimed.

        Tenants take turns (fair_claims.py): the runs of each tenant and type form a lane in claim order
        (priority desc, then scheduledAt asc), and the claim takes one run of each lane in turn, lanes ordered
        by their first run, so a tenant's due run is claimed within the first round whatever another tenant's
        backlog. A type with `limits` gets no more runs than its room (ClaimLimits.room) counted at this claim.
        Returns the jobs this call won, in the order they were chosen, with the types whose room held some of
        their due runs back (Claim.held)."""

    def release_claims(self, jobs: Sequence[Job]) -> None:
        """queued → pending for jobs whose wake-up could not be published (they keep their place in line)."""

    def due_job_types(self, now: datetime) -> set[str]:
        """The job types of due pending runs (to warn about types no executor handles)."""

    def due_templates(self, now: datetime, limit: int) -> list[Job]:
        """Recurring templates that are pending, not paused, with scheduledAt <= now, earliest first."""

    def dead_letter_template(self, template: Job, reason: str) -> bool:
        """pending → dlq for a template whose schedule no longer parses, with the reason in lastError."""


class ExecutorStore(StoreLifecycle, BatchReads, Protocol):
    """An executor's: its attempts started, kept, cancelled on request and ended."""

    def cancel_requested(self, jobs: Sequence[Job]) -> set[str]:
        """The ids of these (running) jobs whose cancellation was requested: what an executor checks with its
        heartbeat."""

    def start_attempts(self, starts: Sequence[AttemptStart]) -> list[Job | StoreError]:
        """Start the next attempt of each job whose wake-up an executor received and whose handler can run now, in
        one batch of writes: move the job queued → running with claimedBy/claimedAt/leaseExpiresAt, only while it
        is queued with n-1 attempts made (that conditional update decides who owns attempt n). A start's `hint`
        (what the wake-up said) lets a store batch the writes; the job is always started as it is now, whatever the
        hint says. A start with a `rate` also keeps to it, across every executor: it is refused with RateLimited
        (nothing else written) when the type's starts so far leave none now, and the starts of the batch count in
        their order (an executor starts what it polled at once).
        Per start, in order, the running job or why it was refused: JobNotFound; TransitionRefused when the job is
        not queued or not of the start's type (a duplicate delivery, a second executor, a cancellation);
        AttemptTaken when the job left `queued` between a store's read of it and its write; StoreUnavailable for a
        start the store could not settle. Raise StoreUnavailable when none could be written."""

    def results_of(self, job_ids: Sequence[str]) -> dict[str, ParentResult]:
        """The `result` of each of these jobs that exists (None for one that kept none) with its workflow step's
        name (None for a job outside a workflow), by id as given: what a dependent's handler reads of its parents
        (HandlerContext.parent_results, step_results)."""

    def extend_leases(self, jobs: Sequence[Job], lease_until: datetime) -> None:
        """Extend leaseExpiresAt of these running attempts so the reaper leaves them alone."""

    def record_progress(self, reports: Sequence[ProgressReport]) -> None:
        """Keep each report as its job's `progress` while the attempt it comes from still runs (a report that
        arrives after its attempt ended is dropped: the job has moved on)."""

    def finish_attempt(self, job: Job, result: AttemptResult) -> Job | None:
        """Record the attempt's one outcome and move the job: succeeded → completed; failed/timeout →
        pending with attempts+1, lastError and scheduledAt = finishedAt + the job's backoff, or dlq when the
        budget is spent. Return the updated job, or None when the attempt's outcome was already decided (the
        reaper closed it as lost): a late result never overwrites a newer attempt."""

    def finish_attempts(self, finishes: Sequence[AttemptFinish]) -> list[Job | StoreError | None]:
        """finish_attempt for many attempts in one batch of writes: per finish, in order, what finish_attempt
        would return, or the error it would raise. Raise StoreUnavailable when none could be written."""


class ReaperStore(StoreLifecycle, Protocol):
    """The reaper's: what a crash left behind, returned."""

    def release_stale_claims(self, queued_before: datetime) -> int:
        """queued → pending for jobs queued before the cutoff (their wake-up was lost); return how many."""

    def prune_key_rates(self, now: datetime, limit: int) -> int:
        """Forget up to `limit` concurrency keys' start-rate times that have fallen behind `now` (claim_limits.py:
        they allow what no record allows); how many were."""

    def sample_backlog(self, now: datetime) -> bool:
        """Once a minute: keep, in the history's minute of `now` (shared/store/history.py), how many runs of
        each tenant and type are due and not started (pending, queued) and how many are claimed or running.
        False (nothing done) when this store already sampled that minute."""

    def expired_attempts(self, now: datetime, limit: int) -> list[Job]:
        """Jobs whose attempt is in an executor's hands and whose lease (leaseExpiresAt, extended by
        extend_leases) ran out before `now`, each as of that attempt."""

    def recover_attempt(self, job: Job, reason: str) -> Job | None:
        """Close the job's current attempt as lost (its one outcome) and move the job to pending with
        attempts+1 and scheduledAt = now + the job's backoff (as for a failure), or to dlq when the budget is spent,
        so a job that kills every executor ends in the DLQ. Return None when the attempt had already finished (the
        executor won)."""

    def settle_dependents(self, ended_before: datetime, limit: int) -> int:
        """The waits a crash left unsettled: the waiting dependents of up to `limit` parents that ended (and got
        their last dependent) before `ended_before`, each settled as a parent's end settles it; how many parents
        were looked at. A store that settles a parent's dependents in the transaction that ends it has none."""

    def settle_workflows(self, created_before: datetime, limit: int) -> int:
        """The workflows a crash left half written (a store that writes them in steps) since before
        `created_before`: each finished when all its steps were written, removed with them otherwise (none of them
        ran); how many. A store that writes a workflow in one transaction has none."""

    def settle_batches(self, limit: int) -> int:
        """Up to `limit` sealed batches not fired yet, each fired when every member has ended (a crash between a
        member's end and its batch's check, on a store that checks in steps); how many were looked at."""

    def delete_emptied_groups(self, created_before: datetime, limit: int) -> tuple[int, bool]:
        """Retention of workflows' and batches' records: of up to `limit` of each created before `created_before`
        (looked at oldest first, each call going on from where the last stopped, then from the oldest again), delete
        those no job of which is left (retention deleted every step's job; a batch's every member and callback, once
        it fired); return how many, and whether more are left to look at. A workflow or batch with a job left is
        kept, however old."""

    def delete_finished(self, status: Status, finished_before: datetime, limit: int) -> int:
        """Retention: delete up to `limit` one-off jobs and runs (never a template: it goes only with a delete of
        its own) that are `status` (completed, cancelled or dlq) and have not changed since before
        `finished_before` (their updatedAt), oldest first, with their attempt records; return how many. A job
        re-driven meanwhile is not deleted. Its idempotency key is free again."""


class JobStore(ApiStore, SchedulerStore, ExecutorStore, ReaperStore, Protocol):
    """What the API, the scheduler, the executors and the reaper ask of the job store, one method per outcome.

    How a store gets there (one write or several, batched with concurrent callers or not) is its own affair;
    these docstrings are what every implementation guarantees and what tests/contract checks."""


def one_run_added(store: JobStore, template: Job, run: RunSpec) -> tuple[Job, bool]:
    """add_run made of add_runs: one run, read back whole."""
    [(run_id, created)] = store.add_runs(template, [run])
    job = store.get(run_id)
    if job is None:  # removed since: nothing of ours to return
        raise StoreUnavailable("the run vanished as it was added; retry")
    return job, created
