"""The Bus seam: wake-up messages to per-type dispatch topics. It never carries job state or payloads.

A wake-up says "job X of type T may be due"; the executor loads the job from the store, so a lost or
duplicated message can never lose or double-run an attempt.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

DISPATCH_TOPIC_PREFIX = "jobs.dispatch."
DLQ_TOPIC = "jobs.dlq"


class BadMessage(ValueError):
    """A message that is not a wake-up (not JSON, missing fields): logged, counted, skipped."""


@dataclass(frozen=True)
class Wakeup:
    jobId: str
    jobType: str
    priority: int

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes | None) -> Wakeup:
        try:
            data = json.loads(raw or b"")
            wakeup = cls(jobId=data["jobId"], jobType=data["jobType"], priority=int(data.get("priority", 0)))
        except (ValueError, KeyError, TypeError) as exc:
            raise BadMessage(f"not a wake-up message: {raw[:200] if raw else raw!r}") from exc
        if not isinstance(wakeup.jobId, str) or not isinstance(wakeup.jobType, str):
            raise BadMessage(f"not a wake-up message: {raw[:200] if raw else raw!r}")
        return wakeup


def dispatch_topic(job_type: str, prefix: str = "") -> str:
    return f"{prefix}{DISPATCH_TOPIC_PREFIX}{job_type}"


class Bus(Protocol):
    def ensure_topics(self, job_types: Iterable[str]) -> None:
        """Create the dispatch topics of these types and the DLQ topic if missing; idempotent."""

    def publish_wakeups(self, wakeups: Sequence[Wakeup]) -> list[Wakeup]:
        """Publish every wake-up to its type's topic (key = jobId) and wait for delivery.
        Return the ones NOT delivered (empty when all landed); never raises for a broker outage."""

    def close(self) -> None:
        """Flush and release connections."""
