"""One scheduler tick: spawn due template runs, claim due jobs, publish their wake-ups.

Runs only inside a trusted leadership term and re-checks the term before every claim and every publish,
so a leader that lost its lease stops within one batch. A job is never left marked queued without its
wake-up having been handed to Kafka: undelivered ones go straight back to pending (and if even that write
fails, the reaper's queued sweep returns them).
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from jobsched.limits import NO_LIMITS
from shared import metrics, tracing
from shared.bus.base import Bus, Wakeup
from shared.config import Settings
from shared.cron import ScheduleError
from shared.election.base import Term
from shared.job_types.limits import LimitsView
from shared.job_types.served import ServedTypes
from shared.model import format_time, utc_now
from shared.schedules.engine import ScheduleEngine
from shared.schedules.policy import Action
from shared.store.base import SchedulerStore
from shared.store.claim_limits import ClaimLimits
from shared.store.fair_claims import Claim, Claimed

log = logging.getLogger("jobsched.scheduler")
TEMPLATES_PER_TICK = 500
# The warning about due runs no executor serves (at the first tick, then every UNKNOWN_TYPES_CHECK_S) may read
# every pending run where the store cannot answer it from an index, and a read that large delays the claims
# next to it; it is only a warning, so it runs every few minutes rather than with each sweep.
UNKNOWN_TYPES_CHECK_S = 300.0


DispatcherFactory = Callable[[SchedulerStore, Bus, "Collection[str] | ServedTypes", Settings], "Dispatcher"]


@dataclass
class TickResult:
    claimed: int = 0
    published: int = 0
    failed: int = 0
    spawned: int = 0
    held: frozenset[str] = frozenset()  # types whose due runs waited for their room: claim them again soon


class Dispatcher:
    # Keep claiming within a tick while batches come back full (a backlog drains at once).
    drains_backlog = True

    def __init__(
        self,
        store: SchedulerStore,
        bus: Bus,
        job_types: Collection[str] | ServedTypes,
        *,
        batch: int,
        lookahead: timedelta = timedelta(0),
        dispatch_ahead: int | None = None,
        limits: LimitsView | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._store = store
        self._bus = bus
        # Fixed types (tests, benchmarks) or the ones live executors announce (every server binary).
        self._served = job_types if isinstance(job_types, ServedTypes) else None
        self._job_types = frozenset() if isinstance(job_types, ServedTypes) else frozenset(job_types)
        self._batch = batch
        self._lookahead = lookahead
        self._dispatch_ahead = dispatch_ahead
        self._limits = limits
        self._clock = clock
        self._next_unknown_check = 0.0
        self._ticked_types: frozenset[str] = frozenset()
        self._schedules = ScheduleEngine(store)

    @classmethod
    def from_settings(
        cls, store: SchedulerStore, bus: Bus, job_types: Collection[str] | ServedTypes, settings: Settings
    ) -> Dispatcher:
        """The dispatcher as CLAIM_BATCH, CLAIM_LOOKAHEAD and DISPATCH_AHEAD configure it, with the types' limits
        where the announced types are known."""
        limits = None
        if isinstance(job_types, ServedTypes):
            limits = LimitsView(job_types.registry, retention=job_types.retention)
        return cls(
            store,
            bus,
            job_types,
            batch=settings.claim_batch,
            lookahead=settings.claim_lookahead,
            dispatch_ahead=settings.dispatch_ahead,
            limits=limits,
        )

    def job_types(self) -> frozenset[str]:
        """The types claimed now."""
        return self._served.live() if self._served is not None else self._job_types

    def gained_types(self) -> bool:
        """Whether a type the last tick did not claim has a live executor now (announced types only)."""
        return self._served is not None and bool(self._served.live() - self._ticked_types)

    def tick(self, term: Term) -> TickResult:
        result = TickResult()
        now = self._clock()
        result.spawned = self.spawn_template_runs(now)
        job_types = self._ticked_types = self.job_types()
        self._claim_due(term, now, job_types, result)
        self._warn_unknown_types(now)  # after the claims: it may read every pending job
        return result

    def claim_held(self, term: Term, job_types: frozenset[str]) -> TickResult:
        """Claims only, of these types (held back by their room at the last claim, and still served): what the
        scheduler does between ticks (templates and warnings wait for the next tick)."""
        result = TickResult()
        self._claim_due(term, self._clock(), job_types & self._ticked_types, result)
        return result

    def _claim_due(self, term: Term, now: datetime, job_types: frozenset[str], result: TickResult) -> None:
        while job_types and term.trusted():
            claim_started = time.time_ns()
            jobs = self._claim(now, job_types)
            result.claimed += len(jobs)
            result.held = result.held | jobs.held
            for job_type, count in jobs.in_use.items():
                metrics.LIMIT_IN_USE.labels(job_type).set(count)
            for job_type in jobs.held | jobs.waited:
                metrics.SCHEDULER_CLAIMS_HELD.labels(job_type).inc()
            if jobs:
                published = self._traced_publish(jobs, term, claim_started)
                result.published += published
                result.failed += len(jobs) - published
            if not self.drains_backlog or len(jobs) < self._batch or result.failed:
                break
            now = self._clock()

    def _claim(self, now: datetime, job_types: frozenset[str]) -> Claim:
        return self._store.claim_due_jobs(
            now, self._batch, job_types, due_by=now + self._lookahead, limits=self.claim_limits(job_types)
        )

    def claim_limits(self, job_types: frozenset[str]) -> dict[str, ClaimLimits]:
        """Each type's bounds: its line of wake-ups (DISPATCH_AHEAD) and its limits."""
        typed = self._limits.all() if self._limits is not None else {}
        return {
            t: ClaimLimits.of(typed[t].effective if t in typed else NO_LIMITS, self._dispatch_ahead)
            for t in job_types
            if self._dispatch_ahead is not None or t in typed
        }

    def _traced_publish(self, jobs: Claim, term: Term, claim_started_ns: int) -> int:
        """`_publish`, in a span from the claim's start when this process traces (shared/tracing/spans.py)."""
        active = tracing.active()
        if active is None:
            return self._publish(jobs, term)
        with active.claim(lambda: [c.traceparent for c in jobs.claimed()], claim_started_ns):
            return self._publish(jobs, term)

    def _publish(self, jobs: Claim, term: Term) -> int:
        claimed = jobs.claimed()  # what the wake-ups carry: the jobs themselves are not read (nor made) here
        # One series lookup per type in the batch, not per job.
        for job_type, count in collections.Counter(c.jobType for c in claimed).items():
            metrics.SCHEDULER_JOBS_CLAIMED.labels(job_type).inc(count)
        if not term.trusted():
            self._store.release_claims(jobs)  # a deposed leader must not publish
            return 0
        now = self._clock()
        wakeups = [
            Wakeup(
                jobId=c.id,
                jobType=c.jobType,
                priority=c.priority,
                claim=c.claimToken,
                attempt=c.next_attempt,
                at=_held_until(c, jobs, now),
                lane=c.tenantId,
            )
            for c in claimed
        ]
        failed_ids = {w.jobId for w in self._bus.publish_wakeups(wakeups)}
        if failed_ids:
            failed = [j for j in jobs if j.id in failed_ids]
            for job_type, count in collections.Counter(j.jobType for j in failed).items():
                metrics.SCHEDULER_DISPATCH_ERRORS.labels(job_type).inc(count)
            log.warning(
                "wake-ups not delivered; jobs back to pending",
                extra={"action": "dispatch_failed", "count": len(failed)},
            )
            self._store.release_claims(failed)
        return len(jobs) - len(failed_ids)

    def spawn_template_runs(self, now: datetime) -> int:
        """Handle every due template's fire times (catch-up, overlap, bounds: shared/schedules), then start
        the buffered runs whose template has no other run going. Return the runs spawned."""
        spawned = 0
        for template in self._store.due_templates(now, TEMPLATES_PER_TICK):
            try:
                actions = self._schedules.fire_due(template, now)
            except ScheduleError as exc:
                self._store.dead_letter_template(template, f"invalid schedule: {exc}")
                metrics.SCHEDULER_INVALID_TEMPLATES.inc()
                log.error(
                    "template dead-lettered",
                    extra={"action": "template_invalid", "jobId": template.id, "error": str(exc)},
                )
                continue
            for action, count in actions.items():
                metrics.SCHEDULER_SCHEDULE_ACTIONS.labels(action.value).inc(count)
            spawned += actions[Action.SPAWNED] + actions[Action.BUFFERED]
        metrics.SCHEDULER_CRON_SPAWNED.inc(spawned)
        self._schedules.start_buffered(now)
        return spawned

    def _warn_unknown_types(self, now: datetime) -> None:
        unknown: set[str] = set()
        if time.monotonic() >= self._next_unknown_check:
            self._next_unknown_check = time.monotonic() + UNKNOWN_TYPES_CHECK_S
            unknown = self._store.due_job_types(now) - self.job_types()
            if unknown:
                log.warning(
                    "due jobs of types no live executor serves wait",
                    extra={"action": "unknown_job_types", "jobTypes": sorted(unknown)},
                )
        if self._served is not None:
            self._served.report_waiting(now, unknown)


def _held_until(job: Claimed, claim: Claim, now: datetime) -> str | None:
    """When the executor may start the job, if later than now: claimed ahead of its time, or given a later start
    by its type's rate; the executor holds the wake-up until then."""
    at = max(job.scheduledAt, claim.not_before.get(job.id, job.scheduledAt))
    return format_time(at) if at > now else None
