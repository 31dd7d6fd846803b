"""What happened, minute by minute (the console's history, issue 51): per tenant and job type, the jobs that
completed and were dead-lettered, the attempts that started and failed (failed, timed out or lost), how late the
attempts started (started - due, as a histogram), and the jobs due and waiting and running (sampled once a minute).

Both stores keep these as bounded per-minute counters, written as things happen and never counted from the jobs
when read: the SQLite store in a row per tenant, type and minute kept KEPT_MINUTES (sqlite/minutes.py), the MongoDB
store in one document per tenant, type and minute that the server deletes a day on (mongo/minutes.py). This module
is what they share: the lateness buckets, and the points a read returns.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

from shared.model import Status, format_time

MINUTE_MS: Final = 60_000
# Upper bounds (milliseconds, inclusive) of the start lateness buckets; one more bucket holds what is later than
# the last (an hour). A quantile is read as the upper bound of the bucket it falls in ("at most"), the one past the
# last bound as that bound ("an hour or more"): the figures say how late starts were to within a bucket, which is
# what a chart can show.
LATENESS_BOUNDS_MS: Final = (
    *(1, 2, 5, 10, 25, 50, 100, 250, 500),
    *(1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000, 3_600_000),
)
LATENESS_BUCKETS: Final = len(LATENESS_BOUNDS_MS) + 1
_READ_AS_MS: Final = (*LATENESS_BOUNDS_MS, LATENESS_BOUNDS_MS[-1])  # each bucket as a quantile reads it
# The counters added to as things happen, in the order the stores keep them; then the two sampled gauges.
EVENT_COUNTERS: Final = ("completed", "dlq", "failed", "started")
LATENESS_COUNTERS: Final = tuple(f"l{i}" for i in range(LATENESS_BUCKETS))
GAUGES: Final = ("waiting", "running")


def lateness_bucket(lateness_ms: float) -> int:
    """The bucket a start this many milliseconds after its due time falls in (early starts count as on time)."""
    return bisect_left(LATENESS_BOUNDS_MS, max(lateness_ms, 0))


def unix_minute(at: datetime) -> int:
    """The minute (since the epoch, UTC) that `at` falls in."""
    return int(at.timestamp() * 1000) // MINUTE_MS


def minute_start(minute: int) -> datetime:
    return datetime.fromtimestamp(minute * 60, UTC)


def backlog_of(
    due: Iterable[tuple[str, str, int]], passing: Iterable[tuple[str, str, str, int]]
) -> dict[tuple[str, str], tuple[int, int]]:
    """Per (tenant, type) with any: waiting (runs due and not started: pending or queued) and running (claimed or
    running), from the counts of the due pending runs (tenant, type, n) and of the jobs queued, claimed or
    running (tenant, type, status, n), as a store counts them for its sample of a minute."""
    gauges: dict[tuple[str, str], tuple[int, int]] = {}
    for tenant, job_type, count in due:
        waiting, running = gauges.get((tenant, job_type), (0, 0))
        gauges[tenant, job_type] = (waiting + count, running)
    for tenant, job_type, status, count in passing:
        waiting, running = gauges.get((tenant, job_type), (0, 0))
        queued = status == Status.QUEUED.value
        gauges[tenant, job_type] = (waiting + count, running) if queued else (waiting, running + count)
    return gauges


def quantile(buckets: Sequence[int], q: float) -> int | None:
    """The upper bound (ms) of the bucket that holds the q-quantile of these counts; None when there are none."""
    total = sum(buckets)
    if total == 0:
        return None
    seen = 0
    for bound, n in zip(_READ_AS_MS, buckets, strict=True):
        seen += n
        if n and seen >= q * total:
            return bound
    raise ValueError(f"a quantile is of 0 to 1, not {q}")


@dataclass
class MinuteCounts:
    """One minute's counters (of one tenant and type, or summed over several)."""

    completed: int = 0
    dlq: int = 0
    failed: int = 0
    started: int = 0
    lateness: list[int] = field(default_factory=lambda: [0] * LATENESS_BUCKETS)
    waiting: int = 0
    running: int = 0

    def add(self, other: MinuteCounts) -> None:
        self.completed += other.completed
        self.dlq += other.dlq
        self.failed += other.failed
        self.started += other.started
        self.lateness = [a + b for a, b in zip(self.lateness, other.lateness, strict=True)]
        self.waiting += other.waiting
        self.running += other.running

    @classmethod
    def of(cls, values: Sequence[int]) -> MinuteCounts:
        """From EVENT_COUNTERS, LATENESS_COUNTERS and GAUGES' values in that order (a row of either store)."""
        n = [int(v or 0) for v in values]
        completed, dlq, failed, started = n[: len(EVENT_COUNTERS)]
        lateness = n[len(EVENT_COUNTERS) : len(EVENT_COUNTERS) + LATENESS_BUCKETS]
        waiting, running = n[len(EVENT_COUNTERS) + LATENESS_BUCKETS :]
        return cls(completed, dlq, failed, started, lateness, waiting, running)


@dataclass(frozen=True)
class History:
    """Minute by minute from `since` (the first whole minute) to `until` (the last, the current one included):
    one entry per minute, a minute with nothing counted as zeros."""

    since: datetime
    until: datetime
    minutes: list[MinuteCounts]

    def to_wire(self) -> dict[str, object]:
        """The API's answer: parallel arrays, one value per minute (compact for a day's 1,440 minutes)."""
        return {
            "since": format_time(self.since),
            "until": format_time(self.until),
            "stepSeconds": 60,
            "completed": [m.completed for m in self.minutes],
            "failed": [m.failed for m in self.minutes],
            "dlq": [m.dlq for m in self.minutes],
            "started": [m.started for m in self.minutes],
            "latenessP50Ms": [quantile(m.lateness, 0.5) for m in self.minutes],
            "latenessP99Ms": [quantile(m.lateness, 0.99) for m in self.minutes],
            "waiting": [m.waiting for m in self.minutes],
            "running": [m.running for m in self.minutes],
        }


def history_of(rows: Iterable[tuple[int, MinuteCounts]], first: int, last: int) -> History:
    """The history of minutes first..last (unix minutes) from (minute, counts) rows, summed per minute; rows
    outside the range are left out."""
    minutes = [MinuteCounts() for _ in range(last - first + 1)]
    for minute, counts in rows:
        if first <= minute <= last:
            minutes[minute - first].add(counts)
    return History(minute_start(first), minute_start(last), minutes)
