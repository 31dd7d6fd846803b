"""The Bus seam: wake-up messages to per-type dispatch topics. It never carries job state or payloads.

A wake-up says "job X of type T may be due"; the executor loads the job from the store, so a lost or
duplicated message can never lose or double-run an attempt.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

DISPATCH_TOPIC_PREFIX = "jobs.dispatch."
DLQ_TOPIC = "jobs.dlq"
EVENTS_TOPIC = "jobs.events"


class BadMessage(ValueError):
    """A message that is not a wake-up (not JSON, missing fields): logged, counted, skipped."""


@dataclass(frozen=True)
class Wakeup:
    jobId: str
    jobType: str
    priority: int
    # Optional hints: the scheduler's claim batch and the attempt it dispatched. An executor that has both
    # starts the batch's jobs with bulk writes; without them (an older scheduler's message) it loads the job
    # by id first. Never needed for safety: the attempt record decides ownership either way.
    claim: str | None = None
    attempt: int | None = None
    # RFC 3339: the job's scheduledAt when it was claimed ahead of time; the executor holds it until then.
    at: str | None = None
    # The job's tenant, for a bus that hands a type's wake-ups out in turns by tenant (the in-process one). Not
    # sent: Kafka delivers a partition in order, and there the short line of wake-ups (DISPATCH_AHEAD) bounds
    # what a job waits behind.
    lane: str | None = field(default=None, compare=False)

    def encode(self) -> bytes:
        # Field by field rather than dataclasses.asdict, whose deep copy was a seventh of the scheduler's CPU
        # when it published a claim of 500.
        body: dict[str, object] = {"jobId": self.jobId, "jobType": self.jobType, "priority": self.priority}
        optional = {"claim": self.claim, "attempt": self.attempt, "at": self.at}
        body.update((k, v) for k, v in optional.items() if v is not None)
        return json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes | None) -> Wakeup:
        try:
            data = json.loads(raw or b"")
            claim, attempt, at = data.get("claim"), data.get("attempt"), data.get("at")
            wakeup = cls(
                jobId=data["jobId"],
                jobType=data["jobType"],
                priority=int(data.get("priority", 0)),
                claim=claim if isinstance(claim, str) and claim else None,
                attempt=attempt if isinstance(attempt, int) and attempt > 0 else None,
                at=at if isinstance(at, str) and at else None,
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise BadMessage(f"not a wake-up message: {raw[:200] if raw else raw!r}") from exc
        if not isinstance(wakeup.jobId, str) or not isinstance(wakeup.jobType, str):
            raise BadMessage(f"not a wake-up message: {raw[:200] if raw else raw!r}")
        return wakeup


def dispatch_topic(job_type: str, prefix: str = "") -> str:
    return f"{prefix}{DISPATCH_TOPIC_PREFIX}{job_type}"


def consumer_group(job_type: str, prefix: str = "") -> str:
    """The group a type's executors join. It takes the topics' prefix too: deployments sharing a broker under
    different prefixes would otherwise be one group, each one's rebalances stopping the other's executors."""
    return f"{prefix}executor-{job_type}"


@dataclass(frozen=True)
class Delivery:
    """One received message; `ack` it once the job's state for it is durably written."""

    value: bytes | None
    topic: str
    partition: int
    offset: int
    # The wake-up itself, when it never left the process (the in-process bus): no bytes to write and read back.
    wakeup: Wakeup | None = None

    def read_wakeup(self) -> Wakeup:
        """The wake-up this delivery carries; BadMessage when its bytes are not one."""
        return self.wakeup if self.wakeup is not None else Wakeup.decode(self.value)


class Subscription(Protocol):
    def poll(self, timeout_s: float) -> Delivery | None:
        """The next message, or None after `timeout_s`. Called from one thread only."""

    def ack(self, delivery: Delivery) -> None:
        """Mark a delivery processed (thread-safe). Offsets are committed only up to the first delivery of a
        partition that is not acked yet, so a crash redelivers everything not fully processed."""

    def set_paused(self, paused: bool) -> None:
        """Stop or restart fetching while the caller is saturated; `poll` keeps the membership alive."""

    def close(self) -> None:
        """Commit what was acked and leave the group."""


class Bus(Protocol):
    # Whether lifecycle events go anywhere (`publish_event`): an executor builds none for a bus that keeps them
    # nowhere.
    carries_events: bool

    def ensure_topics(self, job_types: Iterable[str]) -> None:
        """Create the dispatch topics of these types and the DLQ topic if missing; idempotent."""

    def publish_wakeups(self, wakeups: Sequence[Wakeup]) -> list[Wakeup]:
        """Publish every wake-up to its type's topic (key = jobId) and wait for delivery.
        Return the ones NOT delivered (empty when all landed); never raises for a broker outage."""

    def subscribe(self, job_type: str) -> Subscription:
        """Consume the type's dispatch topic in the group `consumer_group(type, prefix)`, manual offset commits."""

    def publish_dead_letter(self, record: dict[str, object]) -> None:
        """Best effort, never blocks: a record of a dead-lettered job on `jobs.dlq` (the store is the truth)."""

    def publish_event(self, event: dict[str, object]) -> None:
        """Best effort, never blocks: a lifecycle event on `jobs.events`; failures are logged and counted."""

    def close(self) -> None:
        """Flush and release connections."""
