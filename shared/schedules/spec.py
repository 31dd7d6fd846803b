"""A template's schedule with its policy fields: which fire times are due, upcoming or missed. Pure.

Fire times are the schedule's (shared/cron.py, with its daylight-saving rules), bounded by `startAt`
(inclusive) and `endAt` (exclusive). A run's scheduledAt is its fire time moved by the template's `jitter`:
an offset in [0, jitter) derived from the run's key, so every leader computes the same one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.cron import MAX_INTERVAL, Schedule, ScheduleError
from shared.durations import parse_duration
from shared.model import Job, TemplatePolicy
from shared.schedules.policy import Catchup, Overlap

# A fire time handled this late is missed (catchup decides whether it runs). Beyond a tick: covers a leader
# handover after a kill (the election lease runs out first), so a failover alone misses nothing.
ON_TIME_GRACE = timedelta(seconds=30)
# Fire times one template visits in one tick; an outage of a fast schedule is worked off over several ticks.
SCAN_LIMIT = 10_000
# Runs one template spawns in one tick when it catches up with catchup=all; the rest follow next tick.
RUNS_PER_TICK = 100
MAX_PREVIEW = 100
MAX_BACKFILL = 10_000


def parse_policy_duration(name: str, text: str, *, lenient: bool = False) -> timedelta:
    try:
        value = parse_duration(text, lenient=lenient)
    except ValueError as exc:
        raise ScheduleError(f"{name}: {exc}") from None
    if value <= timedelta(0):
        raise ScheduleError(f"{name}: {text!r} must be longer than zero")
    if value > MAX_INTERVAL:
        raise ScheduleError(f"{name}: {text!r} is longer than {MAX_INTERVAL.days}d")
    return value


@dataclass(frozen=True)
class Due:
    """What one look at a template finds: the fire times to run now, how many passed unrun, where the
    template continues, and whether its schedule is over."""

    run: list[datetime]
    missed: int
    handled_until: datetime | None  # the last fire time handled (lastFiredAt), None if nothing was due
    next_at: datetime | None  # the next fire time to handle; None: the schedule has no more
    ended: bool


@dataclass(frozen=True)
class TemplateSpec:
    schedule: Schedule
    overlap: Overlap = Overlap.ALLOW_ALL
    catchup: Catchup = Catchup.LATEST
    catchup_window: timedelta | None = None
    start_at: datetime | None = None
    end_at: datetime | None = None
    remaining_runs: int | None = None
    jitter: timedelta | None = None
    pause_on_failure: bool = False

    @classmethod
    def build(
        cls,
        *,
        cron: str | None,
        interval: str | None,
        timezone: str | None,
        created_at: datetime,
        policy: TemplatePolicy | None = None,
        lenient: bool = False,
    ) -> TemplateSpec:
        """Validate a template's schedule and policy; ScheduleError says what is wrong. An interval counts
        from startAt when given (every 1h from 09:00), else from the template's creation. `lenient`: a stored
        template's durations are read as the version that stored them did (see parse_duration)."""
        policy = policy or TemplatePolicy()
        start_at, end_at = policy.startAt, policy.endAt
        if start_at is not None and end_at is not None and end_at <= start_at:
            raise ScheduleError("endAt must be after startAt")
        if policy.remainingRuns is not None and policy.remainingRuns < 0:
            raise ScheduleError("remainingRuns must be 0 or more")
        anchor = start_at if start_at is not None and interval is not None else created_at
        try:
            overlap = Overlap(policy.overlap or Overlap.ALLOW_ALL)
            catchup = Catchup(policy.catchup or Catchup.LATEST)
        except ValueError as exc:
            raise ScheduleError(str(exc)) from None
        window, jitter = policy.catchupWindow, policy.jitter
        return cls(
            schedule=Schedule.parse(cron=cron, interval=interval, timezone=timezone, anchor=anchor, lenient=lenient),
            overlap=overlap,
            catchup=catchup,
            catchup_window=parse_policy_duration("catchupWindow", window, lenient=lenient) if window else None,
            start_at=start_at,
            end_at=end_at,
            remaining_runs=policy.remainingRuns,
            jitter=parse_policy_duration("jitter", jitter, lenient=lenient) if jitter else None,
            pause_on_failure=bool(policy.pauseOnFailure),
        )

    @classmethod
    def of(cls, template: Job, *, lenient: bool = True) -> TemplateSpec:
        """The spec a stored template carries (read as the version that stored it did, unless not `lenient`: a
        template about to be changed); ScheduleError when it no longer parses."""
        return cls.build(
            cron=template.cron,
            interval=template.interval,
            timezone=template.timezone,
            created_at=template.createdAt,
            policy=template,
            lenient=lenient,
        )

    # --- fire times -------------------------------------------------------------------------------------

    def next_fire(self, after: datetime) -> datetime | None:
        """The first fire time strictly after `after` inside the bounds; None when the schedule is over."""
        if self.remaining_runs == 0:
            return None
        try:
            if self.start_at is not None and after < self.start_at:
                after = self.start_at - timedelta(microseconds=1)
            found = self.schedule.next_after(after)
        except OverflowError:  # past the last time a datetime holds: the schedule has no more
            return None
        return None if self.end_at is not None and found >= self.end_at else found

    def upcoming(self, cursor: datetime, count: int) -> list[datetime]:
        """The next `count` fire times from `cursor` (included when it is one), within the bounds and the
        runs left."""
        if self.remaining_runs is not None:
            count = min(count, self.remaining_runs)
        times: list[datetime] = []
        at = self.first_fire(cursor)
        while at is not None and len(times) < count:
            times.append(at)
            at = self.next_fire(at)
        return times

    def between(self, start: datetime, end: datetime, limit: int) -> list[datetime]:
        """The schedule's fire times in [start, end), ignoring the bounds (a backfill names its own); raise
        ScheduleError past `limit` times."""
        times: list[datetime] = []
        try:
            at = self.schedule.next_after(start - timedelta(microseconds=1))
            while at < end:
                if len(times) == limit:
                    raise ScheduleError(f"the range holds more than {limit} fire times; backfill a shorter range")
                times.append(at)
                at = self.schedule.next_after(at)
        except OverflowError:
            if not times:
                raise ScheduleError("the range lies outside the times a schedule can reach") from None
        return times

    def due(self, cursor: datetime, now: datetime) -> Due:
        """The fire times from `cursor` (the template's next unhandled one) up to `now`, sorted by the
        catch-up policy into the ones to run and the ones missed."""
        visited: list[datetime] = []
        at = self.first_fire(cursor)
        while at is not None and at <= now and len(visited) < SCAN_LIMIT:
            visited.append(at)
            at = self.next_fire(at)
        if not visited:
            return Due([], 0, None, at, at is None)
        if at is not None and at <= now:  # scan limit: everything so far is old; the rest comes next tick
            return Due([], len(visited), visited[-1], at, False)
        run = self._to_run(visited, now)
        if self.catchup is Catchup.ALL and len(run) > RUNS_PER_TICK:
            run = run[:RUNS_PER_TICK]
            last = run[-1]
            handled = [t for t in visited if t <= last]
            return Due(run, len(handled) - len(run), last, self.next_fire(last), False)
        return Due(run, len(visited) - len(run), visited[-1], at, at is None)

    def _to_run(self, visited: list[datetime], now: datetime) -> list[datetime]:
        window_start = now - self.catchup_window if self.catchup_window is not None else None
        fresh = [t for t in visited if window_start is None or t >= window_start]
        if self.catchup is Catchup.ALL:
            return fresh
        latest = visited[-1]
        if latest not in fresh:
            return []
        if self.catchup is Catchup.NONE and now - latest > ON_TIME_GRACE:
            return []
        return [latest]

    def first_fire(self, moment: datetime) -> datetime | None:
        """The first fire time at or after `moment` inside the bounds (a cursor is normally one itself)."""
        return self.next_fire(moment - timedelta(microseconds=1))

    # --- runs -------------------------------------------------------------------------------------------

    def run_at(self, run_key: str, planned: datetime) -> datetime:
        """The run's scheduledAt: the fire time plus the jitter offset its key gives (milliseconds)."""
        if self.jitter is None:
            return planned
        span_ms = max(int(self.jitter / timedelta(milliseconds=1)), 1)
        digest = hashlib.sha256(run_key.encode()).digest()
        return planned + timedelta(milliseconds=int.from_bytes(digest[:8], "big") % span_ms)


class NoFireTime(ScheduleError):
    """A schedule valid as written whose bounds (startAt, endAt, remainingRuns) leave it no fire time from now on."""
