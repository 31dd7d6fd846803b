"""Jobs that wait for other jobs (`dependsOn`): which parents a job may name, and what its wait becomes once they
end, decided once for every store.

A job with parents is created `waiting` and is never claimed while it waits. Its wait is settled against its
parents' statuses, by whoever may have changed them: its own creation (the parents may have ended already) and
the end of each parent (the store looks the parent's waiting dependents up). Settling reads every parent, so it
is right whoever does it and however often: a dependent is released only once every parent has ended, and a
dependent settled twice is moved once (the write is guarded on `waiting`). Parents exist before their dependent
(it names them by id), so a cycle cannot be written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final

from shared.model import TERMINAL, Status
from shared.store.base import DependencyRefused, NewJob
from shared.store.transitions import Fields, attempt_cancelled, cancelled, stored_time

# The parents one job may name. Settling a wait reads every parent, once per parent's end: a fan-in this wide
# costs MAX_PARENTS² reads in all, so a wider one is a batch's (a counter), not a dependency list's.
MAX_PARENTS: Final = 100
# A store that settles waits in steps (MongoDB: store/mongo/dependencies.py) marks a parent when a dependent is
# created, and a sweep settles the dependents of parents that ended with a mark SETTLE_GRACE old. A mark younger
# than MARK_REUSED_FOR is not written again by the next dependent's create (a fan-out of 10,000 writes its parent
# a few times, not 10,000): so a create relies on a mark at most that old, and the grace must exceed it by more
# than any create takes (milliseconds; the API's deadline is seconds).
MARK_REUSED_FOR: Final = timedelta(seconds=30)
SETTLE_GRACE: Final = timedelta(minutes=1)


class ParentFailure(StrEnum):
    """What a parent that ends dlq or cancelled does to its waiting dependent."""

    CANCEL = "cancel"  # the dependent is cancelled, its attempt's error naming the parent (the default)
    RUN = "run"  # the dependent runs once every parent has ended, however each ended


@dataclass(frozen=True)
class Parent:
    """What a create reads of a job its request names in dependsOn."""

    id: str
    tenantId: str
    is_template: bool


def check_parents(new: NewJob, found: Mapping[str, Parent]) -> None:
    """Raise DependencyRefused for the first parent of `new` that is not a one-off job or run of its tenant
    (`found`: the parents that exist, by their lower-case id). Another tenant's job reads as not found: no tenant learns
    another's ids."""
    for parent_id in new.dependsOn or ():
        parent = found.get(parent_id.lower())
        if parent is None or parent.tenantId != new.tenantId:
            raise DependencyRefused(f"job {parent_id} not found")
        if parent.is_template:
            raise DependencyRefused(f"job {parent_id} is a recurring template; a job can wait for runs only")


@dataclass(frozen=True)
class Waiting:
    """What settling a waiting job reads of it."""

    id: str
    dependsOn: list[str]
    onParentFailure: str | None
    scheduledAt: datetime
    attempts: int


@dataclass(frozen=True)
class Settled:
    """A wait's end: the job's new fields, and for a cancellation the record of the attempt that will not run."""

    fields: Fields
    cancelled_attempt: Fields | None = None


def resolution(job: Waiting, statuses: Mapping[str, Status], now: datetime) -> Settled | None:
    """What the waiting `job` becomes given its parents' statuses (`statuses`: by id), or None while one has not
    ended. Released: pending, due at its scheduledAt or now if that is later (its lateness counts from the moment
    it could run). Under the cancel policy the first parent found ended otherwise than completed cancels it at
    once, whatever the others are doing. A parent missing from `statuses` was deleted, which only a job that ended
    can be (by hand, or by retention days later): its end settled its dependents then (a failure cancelled them), so
    one still waiting counts it as done, as a completed parent."""
    policy = ParentFailure(job.onParentFailure or ParentFailure.CANCEL)
    waiting_for_one = False
    for parent_id in job.dependsOn:
        status = statuses.get(parent_id)
        if status is None or status is Status.COMPLETED:
            continue
        if status in TERMINAL:
            if policy is ParentFailure.CANCEL:
                return cancelled_wait(job.attempts + 1, f"parent job {parent_id} ended {status.value}", now)
            continue
        waiting_for_one = True
    if waiting_for_one:
        return None
    now = stored_time(now)
    return Settled({"status": Status.PENDING.value, "scheduledAt": max(job.scheduledAt, now), "updatedAt": now})


def cancelled_wait(attempt: int, error: str, now: datetime) -> Settled:
    """A waiting job cancelled because of what it waited for (a parent's failure, its batch's): its lastError and
    its one `cancelled` attempt (number `attempt`) say why."""
    record = attempt_cancelled(now) | {"error": error}
    return Settled(cancelled(now) | {"lastError": error}, {"attempt": attempt, **record})


def parents_of(jobs: Iterable[Waiting]) -> list[str]:
    """Every parent of these waiting jobs, once each (what settling them reads)."""
    return list(dict.fromkeys(parent for job in jobs for parent in job.dependsOn))
