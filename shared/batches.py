"""Batches: a group of jobs of any size, added in one or several requests, with a callback job when every member
has ended (`onComplete`) and/or when every member completed (`onSuccess`), and its progress readable meanwhile.

A member is an ordinary job carrying `batchId`; a callback is a job created with the batch, held (`waiting` for
nobody) and carrying `callbackOf`. Once the batch is sealed (no more members), the end of any member looks, in
the index of the batch's jobs by status, for a member that has not ended: a probe of one index entry, whatever
the batch's size, so a fan-in of 100,000 members costs 100,000 probes in all, never a count per member. When none
is left, the batch is fired once (its record's `firedAt`, a guarded write): onComplete is released, onSuccess
released when no member ended dlq or cancelled, else cancelled naming how many did not complete. A store settles
this in the transaction that ends the member where it has them (SQLite); MongoDB checks after the member's end,
and the reaper checks every sealed batch not yet fired, so a crash in between delays a callback by a sweep.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from shared.model import TERMINAL, Job, Status, format_time

# The members one request adds (the body of POST /jobs/batch's size).
MAX_ADDED: Final = 1000
ENDED: Final = frozenset(s.value for s in TERMINAL)
# A member's end that is not a completion: onSuccess is cancelled when the batch has one.
NOT_COMPLETED: Final = (Status.DLQ.value, Status.CANCELLED.value)
UNFINISHED: Final = tuple(s.value for s in Status if s not in TERMINAL)


class BatchStatus(StrEnum):
    OPEN = "open"  # members may still be added
    RUNNING = "running"  # sealed; a member has not ended
    SUCCEEDED = "succeeded"  # sealed; every member completed
    FAILED = "failed"  # sealed; every member ended, one otherwise than completed


@dataclass(frozen=True)
class Batch:
    """A batch's record. `id` is a 24-hex ObjectId string on every store."""

    id: str
    tenantId: str
    idempotencyKey: str
    name: str | None
    createdAt: datetime
    sealed: bool
    onComplete: str | None  # the callbacks' job ids
    onSuccess: str | None
    firedAt: datetime | None = None
    # Members that ended dlq or cancelled (less those re-driven before the batch fired): kept on the record, so
    # that deleting a failed member (by hand, or retention) does not make the batch read as a success.
    failures: int = 0


@dataclass(frozen=True)
class BatchView:
    """A batch with its members counted by status (its progress)."""

    batch: Batch
    counts: Mapping[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def status(self) -> BatchStatus:
        """Open until sealed; running until it fired (its callbacks released then: a member re-driven after it
        fired does not make it run again); then failed when a member ended otherwise than completed."""
        if not self.batch.sealed:
            return BatchStatus.OPEN
        if self.batch.firedAt is None:
            return BatchStatus.RUNNING
        if self.batch.failures or any(self.counts.get(status) for status in NOT_COMPLETED):
            return BatchStatus.FAILED
        return BatchStatus.SUCCEEDED

    def to_wire(self) -> dict[str, Any]:
        batch = self.batch
        wire: dict[str, Any] = {
            "id": batch.id,
            "tenantId": batch.tenantId,
            "idempotencyKey": batch.idempotencyKey,
            "createdAt": format_time(batch.createdAt),
            "sealed": batch.sealed,
            "status": self.status.value,
            "total": self.total,
            "counts": dict(self.counts),
            "failures": batch.failures,
        }
        if batch.name is not None:
            wire["name"] = batch.name
        callbacks = {"onComplete": batch.onComplete, "onSuccess": batch.onSuccess}
        wire["callbacks"] = {k: v for k, v in callbacks.items() if v is not None}
        if batch.firedAt is not None:
            wire["firedAt"] = format_time(batch.firedAt)
        return wire


@dataclass(frozen=True)
class MemberResult:
    """What a callback reads of a member: its id, how it ended, and what its handler returned."""

    jobId: str
    status: str
    result: Any


@dataclass(frozen=True)
class MembersPage:
    """Which of a batch's members a store reads (JobStore.batch_members): at most `limit` in the order of status
    then id, after the member `after`, of `status` only when given, with their results unless not `results`."""

    after: MemberResult | None
    limit: int
    status: str | None = None
    results: bool = True


def callback_key(batch_id: str, callback: str) -> str:
    """A callback job's idempotency key: the batch's id makes it the batch's alone."""
    return f"batch-{batch_id}-{callback}"


def not_completed_error(batch: Batch, counts: Mapping[str, int]) -> str:
    """The lastError of an onSuccess callback cancelled because some members did not complete."""
    failed = max(batch.failures, sum(counts.get(status, 0) for status in NOT_COMPLETED))
    return f"batch {batch.id}: {failed} of {sum(counts.values())} members did not complete"


def failed_ends(jobs: Iterable[Job | None]) -> dict[str, int]:
    """Of these jobs that just ended, how many ended otherwise than completed, by batch (members only)."""
    failed: dict[str, int] = {}
    for job in jobs:
        if job is not None and job.batchId is not None and job.status.value in NOT_COMPLETED:
            failed[job.batchId] = failed.get(job.batchId, 0) + 1
    return failed
