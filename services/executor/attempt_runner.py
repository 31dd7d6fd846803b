"""What an executor does with one wake-up message.

start the attempt (the store loads the job, skips unless it is queued for this type, claims the attempt by
inserting `<jobId>:<n>` — a duplicate means someone else owns it — and moves it to running; many deliveries'
starts become one bulk write on MongoDB) → run the handler under its timeout → record the one outcome
(completed, retry with backoff, or dlq) → acknowledge the message. The three steps are separate so that the
runner can free the handler slot before the outcome is written.
Every skip and every failure of our own is logged and counted; none ends the process.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any, TypeVar

from prometheus_client import Counter

from jobsched.handlers import HandlerContext, JobLogger, JobTypes
from jobsched.limits import NO_LIMITS, Limits
from services.executor.attempt_results import bounded_snooze, kept_result
from services.executor.batch_reads import BatchReads
from services.executor.handler_calls import (
    Cancellation,
    Deadlines,
    Ending,
    call_plain,
    run_async_handler,
    settled,
    timed_out,
)
from services.executor.progress import ProgressReports
from shared import metrics, tracing
from shared.bus.base import BadMessage, Bus, Delivery, Wakeup
from shared.model import Job, Outcome, Status, format_time, utc_now
from shared.store.base import (
    AttemptFinish,
    AttemptResult,
    AttemptStart,
    AttemptTaken,
    ExecutorStore,
    JobNotFound,
    RateLimited,
    StartHint,
    StoreError,
    StoreUnavailable,
    TransitionRefused,
)
from shared.store.claim_limits import ClaimLimits
from shared.store.group_commit import GroupCommit

log = logging.getLogger("jobsched.executor")
handler_log = logging.getLogger("jobsched.handler")  # what handlers log through ctx.logger
T = TypeVar("T")
STORE_RETRY_S = (0.5, 1, 2, 4, 8, 15)  # then give up: the reaper returns the job


@dataclass(frozen=True)
class _Attempt:
    """A started attempt's handler call, as prepared for it."""

    ctx: HandlerContext
    cancellation: Cancellation
    timeout_s: float
    started: datetime
    snoozes: int  # the job's so far
    span: tracing.AttemptSpan  # NO_SPAN when tracing is off


class AttemptRunner:
    def __init__(
        self,
        store: ExecutorStore,
        bus: Bus,
        registry: JobTypes,
        job_type: str,
        worker_id: str,
        *,
        default_timeout: timedelta,
        lease: timedelta,
        limits: Callable[[], Limits] = lambda: NO_LIMITS,
        on_dependents: Callable[[], None] = lambda: None,
        on_room: Callable[[], None] = lambda: None,
    ) -> None:
        """`limits`: the type's limits now, whose start rates (the type's, per key) every start keeps to in the
        store. `on_dependents`: called when an outcome ended a job that others waited for (one of them may be due
        now): the scheduler's nudge, so that it claims at once rather than at its next tick. `on_room`: called
        once runs were started, or ended while the type has a concurrency limit (what gives a claim held back by
        the type's line of wake-ups or its limits room again): the scheduler's room_freed, in its process."""
        self._store = store
        self._on_dependents = on_dependents
        self._on_room = on_room
        self._limits = limits
        self._bus = bus
        handler = registry.get(job_type)
        if handler is None:
            raise ValueError(f"no handler for job type {job_type!r}; known types: {', '.join(registry.names())}")
        self._handler = handler
        self._handler_fn = handler.fn  # built once: it converts the payload where the handler takes a class
        self._job_type = job_type
        self.worker_id = worker_id
        self._default_timeout = default_timeout
        self._lease = lease
        self._running: dict[str, tuple[Job, Cancellation]] = {}
        self._lock = threading.Lock()
        # This type's series, looked up once rather than by label at every attempt.
        self._lateness = metrics.EXECUTOR_START_LATENESS_SECONDS.labels(job_type)
        self._in_flight = metrics.EXECUTOR_IN_FLIGHT.labels(job_type)
        self._rate_refused = metrics.EXECUTOR_STARTS_RATE_LIMITED.labels(job_type)
        self._handler_seconds = metrics.EXECUTOR_HANDLER_SECONDS.labels(job_type)
        self._processed: dict[Outcome, Counter] = {}  # by outcome, filled as outcomes occur
        # Outcomes of concurrent attempts, written together by whichever of their threads finds no batch in
        # flight; the others go on without waiting (record_later), so the batch may gather them first.
        self._outcomes: GroupCommit[AttemptFinish, Job | None] = GroupCommit(self._finish_batch, gathers=True)
        self._progress = ProgressReports()
        self._batch_reads = BatchReads(store)

    @property
    def job_type(self) -> str:
        return self._job_type

    def running(self) -> list[Job]:
        with self._lock:
            return [job for job, _ in self._running.values()]

    def check_cancellations(self) -> int:
        """Ask the store which running jobs were cancelled and signal their handlers; how many were signalled
        (the heartbeat's call)."""
        with self._lock:
            running = dict(self._running)
        if not running:
            return 0
        requested = self._store.cancel_requested([job for job, _ in running.values()])
        for job_id in requested:
            job, cancellation = running[job_id]
            if not cancellation.requested:
                log.info(
                    "cancelling the running handler",
                    extra={"action": "attempt_cancelling", "jobId": job_id, "attempt": job.next_attempt},
                )
            cancellation.request()
        return len(requested)

    def write_progress(self) -> int:
        """Write the progress the running attempts' handlers reported since the last call (the heartbeat's
        call); how many reports were written."""
        reports = self._progress.take()
        if reports:
            self._store.record_progress(reports)
        return len(reports)

    def decode(self, delivery: Delivery) -> Wakeup | None:
        """The delivery's wake-up, or None for a malformed message (logged and counted as skipped)."""
        try:
            return delivery.read_wakeup()
        except BadMessage as exc:
            self._skip("bad_message", error=str(exc))
            return None

    def start_many(self, wakeups: Sequence[Wakeup]) -> list[Job | StoreUnavailable | RateLimited | None]:
        """Start the wake-ups' attempts in one store call, trying once (the executor's poll loop calls it and
        must not wait): per wake-up, the running job, None when it is skipped (logged and counted),
        StoreUnavailable when the store could not settle it (then `start_retrying` goes on with it), or
        RateLimited when the type's start rate (or its key's) has no start left now (the job stays queued: try
        again then)."""
        lease_until = utc_now() + self._lease
        limits = self._limits()
        starts = [self._attempt_start(wakeup, lease_until, limits) for wakeup in wakeups]
        try:
            outcomes: Sequence[Job | StoreError] = self._store.start_attempts(starts)
        except StoreUnavailable as exc:
            return [exc] * len(wakeups)
        if any(isinstance(outcome, Job) for outcome in outcomes):
            self._on_room()
        started: list[Job | StoreUnavailable | RateLimited | None] = []
        for wakeup, outcome in zip(wakeups, outcomes, strict=True):
            if isinstance(outcome, RateLimited):
                self._rate_refused.inc()
            if isinstance(outcome, Job | StoreUnavailable | RateLimited):
                started.append(outcome)
            else:
                self._start_refused(wakeup, outcome)
                started.append(None)
        return started

    def start_retrying(self, wakeup: Wakeup) -> Job | None:
        """Start one wake-up's attempt, retrying while the store is unavailable: the running job, or None when
        it is skipped or the store stayed unavailable (the reaper returns the job)."""

        def once() -> Job | None:
            [outcome] = self.start_many([wakeup])
            if isinstance(outcome, StoreUnavailable):
                raise outcome
            # Its start rate's turn has not come: left queued for the reaper to put back in line.
            return None if isinstance(outcome, RateLimited) else outcome

        return self._retrying(once, wakeup.jobId)

    def record(self, job: Job, result: AttemptResult) -> None:
        """Record the attempt's outcome (retrying while the store is unavailable, then leaving the attempt to
        the reaper, which closes it as lost)."""
        self._retrying(lambda: self._finish(job, result), job.id)

    def record_later(self, job: Job, result: AttemptResult, recorded: Callable[[], None]) -> None:
        """Record the outcome with those of the other attempts finishing now, without waiting for it:
        `recorded()` runs once it is written (or left to the reaper, as `record` does), on the thread that
        wrote it, which may be this one. A batch the store could not take is retried outcome by outcome on a
        thread of its own, so the next batch does not wait for it."""
        finish = self._finish_request(job, result)
        self._outcomes.submit_later(finish, partial(self._outcome_written, finish, recorded))

    def _outcome_written(
        self, finish: AttemptFinish, recorded: Callable[[], None], written: Job | BaseException | None
    ) -> None:
        if isinstance(written, StoreUnavailable):

            def retry() -> None:
                try:
                    self.record(finish.job, finish.result)
                finally:
                    recorded()

            try:
                threading.Thread(target=retry, daemon=True, name="outcome-retry").start()
            except RuntimeError:  # no thread: the reaper closes the attempt once its lease runs out
                self._gave_up(finish.job.id, written)
                recorded()
            return
        try:
            if isinstance(written, BaseException):
                raise written
            self._finished(finish, written)
        except Exception:  # as in the runner: the reaper closes an attempt whose outcome was never written
            log.exception("recording failed", extra={"action": "delivery_error", "jobId": finish.job.id})
        finally:
            recorded()

    def _retrying(self, step: Callable[[], T], job_id: str) -> T | None:
        for pause in (*STORE_RETRY_S, None):
            try:
                return step()
            except StoreUnavailable as exc:
                if pause is None:
                    self._gave_up(job_id, exc)
                    return None
                time.sleep(pause)
        return None

    def _gave_up(self, job_id: str, error: BaseException) -> None:
        log.error(
            "store unavailable; leaving the job to the reaper",
            extra={"action": "store_unavailable", "jobId": job_id, "error": str(error)},
        )

    def _attempt_start(self, wakeup: Wakeup, lease_until: datetime, limits: Limits) -> AttemptStart:
        hint = StartHint(wakeup.claim, wakeup.attempt) if wakeup.claim and wakeup.attempt else None
        return AttemptStart(
            wakeup.jobId, self._job_type, self.worker_id, lease_until, hint, limits.rate, limits.rate_per_key
        )

    def _start_refused(self, wakeup: Wakeup, refusal: StoreError) -> None:
        if isinstance(refusal, JobNotFound):
            self._skip("unknown_job", job_id=wakeup.jobId)
        elif isinstance(refusal, TransitionRefused):
            # another type; or cancelled, finished, running elsewhere, back to pending: not this delivery's attempt
            reason = "wrong_type" if refusal.job.jobType != self._job_type else f"status_{refusal.job.status.value}"
            self._skip(reason, job_id=wakeup.jobId)
        elif isinstance(refusal, AttemptTaken):
            self._skip("duplicate", job_id=wakeup.jobId)
        else:
            self._skip("store_error", job_id=wakeup.jobId, error=str(refusal))

    def _run_async(self, job: Job) -> AttemptResult:
        """`run` for an async handler: on an event loop of this thread's own, cancelled at its deadline."""
        attempt = self._begin(job)
        traced = attempt.span.enter()  # the handler's loop runs in a copy of this thread's context
        try:
            handler = self._handler
            ending = run_async_handler(
                self._handler_fn,
                job.payload,
                attempt.ctx,
                attempt.timeout_s,
                attempt.cancellation,
                handler.retry_rule,
            )
        finally:
            attempt.span.leave(traced)
            self._leave(job)
        return self._result(attempt, ending)

    def run(self, job: Job, deadlines: Deadlines, on_expiry: Callable[[AttemptResult], None]) -> AttemptResult | None:
        """Run the handler of a started attempt on this thread under its timeout (the job's, else the type's,
        else JOB_TIMEOUT); never raises for the handler's sake. A plain handler's timeout is watched by
        `deadlines`: the result, or None when the call overran its deadline: then `on_expiry` got the timeout's
        result (on another thread, at the deadline) and this thread is to be abandoned."""
        handler = self._handler
        if handler.is_async:
            return self._run_async(job)
        attempt = self._begin(job)

        def expire() -> None:
            self._leave(job)
            on_expiry(self._result(attempt, settled(timed_out(attempt.timeout_s), attempt.cancellation)))

        try:
            watched = deadlines.watch(attempt.timeout_s, expire)
        except BaseException:
            self._leave(job)
            raise
        traced = attempt.span.enter()
        try:
            ending = call_plain(self._handler_fn, job.payload, attempt.ctx, handler.retry_rule)
        finally:
            attempt.span.leave(traced)
            in_time = deadlines.returned(watched)
            if in_time:
                self._leave(job)
        if not in_time:
            return None
        return self._result(attempt, settled(ending, attempt.cancellation))

    def _begin(self, job: Job) -> _Attempt:
        timeout_s = job.timeoutSeconds or self._handler.defaults.timeout_s or self._default_timeout.total_seconds()
        started = utc_now()
        cancellation = Cancellation()
        ids = {"jobId": job.id, "tenantId": job.tenantId, "jobType": job.jobType, "attempt": job.next_attempt}
        logger = JobLogger(handler_log, ids)
        ctx = HandlerContext(
            job_id=job.id,
            job_type=job.jobType,
            attempt=job.next_attempt,
            deadline=started + timedelta(seconds=timeout_s),
            tenant_id=job.tenantId,
            scheduled_at=job.scheduledAt,
            logger=logger,
            cancelled=cancellation.event,
            planned_at=job.plannedAt,
            template_id=job.templateId,
            on_progress=self._progress.reporter(job, logger),
            parents=tuple(job.dependsOn or ()),
            read_results=self._store.results_of,
            batch_id=job.callbackOf,
            read_batch=self._batch_reads.progress,
            read_members=self._batch_reads.members,
        )
        if job.cancelRequested:  # asked for between the claim and the start
            cancellation.request()
        lateness_s = (started - job.scheduledAt).total_seconds()
        self._lateness.observe(max(lateness_s, 0.0))
        self._event("job.execution.started", job)
        span = tracing.attempt_span(job, job.next_attempt)
        with self._lock:
            self._running[job.id] = (job, cancellation)
        self._in_flight.inc()
        return _Attempt(ctx, cancellation, timeout_s, started, job.snoozes or 0, span)

    def _leave(self, job: Job) -> None:
        """The handler has returned or was abandoned: the attempt no longer runs here."""
        self._in_flight.dec()
        with self._lock:
            self._running.pop(job.id, None)
        self._progress.forget(job)

    def _result(self, attempt: _Attempt, ending: Ending) -> AttemptResult:
        finished = utc_now()
        self._handler_seconds.observe((finished - attempt.started).total_seconds())
        ending = bounded_snooze(ending, attempt.snoozes)
        result, not_kept = kept_result(ending.returned)
        attempt.span.end(ending.outcome, ending.error or not_kept, ending.exception, ending.traceback)
        return AttemptResult(
            outcome=ending.outcome,
            startedAt=attempt.started,
            finishedAt=finished,
            error=ending.error or not_kept,
            traceback=ending.traceback,
            result=result,
            snooze=ending.snooze,
            final=ending.final,
            retry_after=ending.retry_after,
        )

    def _finish_request(self, job: Job, result: AttemptResult) -> AttemptFinish:
        if result.outcome is Outcome.CANCELLED:
            job = job.evolve(cancelRequested=True)
        return AttemptFinish(job, result)

    def _finish_batch(self, finishes: Sequence[AttemptFinish]) -> Sequence[Job | StoreError | None]:
        """The outcomes' group commit: a batch written."""
        written = self._store.finish_attempts(finishes)
        self._ended()
        return written

    def _finish(self, job: Job, result: AttemptResult) -> None:
        finish = self._finish_request(job, result)
        updated = self._store.finish_attempt(finish.job, finish.result)
        self._ended()
        self._finished(finish, updated)

    def _ended(self) -> None:
        """Outcomes were written: an end gives room back only where a concurrency limit counts the runs in flight
        (the line of wake-ups counts queued runs, which a start takes out), so only then is it announced."""
        if ClaimLimits.of(self._limits(), None).bounds_concurrency:
            self._on_room()

    def _finished(self, finish: AttemptFinish, updated: Job | None) -> None:
        """What follows a written outcome: counted, its event published, logged; a dead letter published."""
        job, result = finish.job, finish.result
        if updated is None:
            self._skip("late_result", job_id=job.id, attempt=job.next_attempt)
            return
        if updated.hasDependents:
            self._on_dependents()
        self._processed_counter(result.outcome).inc()
        duration_ms = result.duration_ms
        names = {
            Outcome.SUCCEEDED: "succeeded",
            Outcome.TIMEOUT: "timeout",
            Outcome.CANCELLED: "cancelled",
            Outcome.SNOOZED: "snoozed",
        }
        name = names.get(result.outcome, "failed")
        self._event(f"job.execution.{name}", job, durationMs=duration_ms, error=result.error)
        # A success is counted and published as an event; logged only at DEBUG, since at thousands of jobs a
        # second a line per success costs more CPU than the job. What needs a look stays at INFO.
        level = logging.DEBUG if result.outcome is Outcome.SUCCEEDED else logging.INFO
        if log.isEnabledFor(level):
            log.log(
                level,
                "attempt finished",
                extra={
                    "action": f"attempt_{result.outcome.value}",
                    "jobId": job.id,
                    "tenantId": job.tenantId,
                    "attempt": job.next_attempt,
                    "status": updated.status.value,
                    "durationMs": duration_ms,
                    "error": result.error or None,
                },
            )
        if updated.status is Status.DLQ:
            metrics.EXECUTOR_DEAD_LETTERED.labels(self._job_type).inc()
            self._bus.publish_dead_letter({**updated.to_wire(), "deadLetteredAt": format_time(utc_now())})
            self._event("job.execution.dead_lettered", job, error=result.error)
            log.warning(
                "job dead-lettered",
                extra={"action": "job_dead_lettered", "jobId": job.id, "tenantId": job.tenantId, "error": result.error},
            )

    def _processed_counter(self, outcome: Outcome) -> Counter:
        counter = self._processed.get(outcome)
        if counter is None:  # a race creates the same series twice: labels() returns the one child
            counter = self._processed[outcome] = metrics.EXECUTOR_PROCESSED.labels(self._job_type, outcome.value)
        return counter

    def _event(self, name: str, job: Job, **extra: Any) -> None:
        if not self._bus.carries_events:
            return
        event: dict[str, object] = {
            "event": name,
            "jobId": job.id,
            "jobType": job.jobType,
            "tenantId": job.tenantId,
            "attempt": job.next_attempt,
            "at": format_time(utc_now()),
            "worker": self.worker_id,
        }
        event.update({k: v for k, v in extra.items() if v is not None})
        self._bus.publish_event(event)

    def _skip(
        self, reason: str, job_id: str | None = None, attempt: int | None = None, error: str | None = None
    ) -> None:
        metrics.EXECUTOR_SKIPPED.labels(self._job_type, reason).inc()
        log.info(
            "delivery skipped",
            extra={"action": "delivery_skipped", "reason": reason, "jobId": job_id, "attempt": attempt, "error": error},
        )
