"""What an operator reads beside the job's own transitions: pages of jobs, counts, the DLQ by error.

Every query here is bounded by an index or a limit, so the console stays cheap on a large store: pages walk
an index from a cursor (never an offset), counts read index entries only, and the last hour's figures range
over the entries of that hour. The implementations (shared/store/sqlite/browse.py, shared/store/mongo/browse.py)
read their database's connections; the backend (shared/backends.py) opens the one that fits its store.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from shared.jsonsafe import shorten
from shared.model import Job, Status, format_time, parse_time
from shared.store.history import History

OBJECT_ID_HEX = frozenset("0123456789abcdef")


class CursorError(ValueError):
    """A page cursor that is not `<createdAt>_<id>`."""


@dataclass(frozen=True, order=True)
class PageCursor:
    """A position in the newest-first order of jobs: (createdAt, id), both descending."""

    createdAt: datetime
    id: str

    @classmethod
    def of(cls, job: Job) -> PageCursor:
        return cls(job.createdAt, job.id)

    @classmethod
    def parse(cls, text: str) -> PageCursor:
        created, sep, job_id = text.rpartition("_")
        if not sep or len(job_id) != 24 or not set(job_id.lower()) <= OBJECT_ID_HEX:
            raise CursorError(f"malformed cursor {shorten(text)!r}: expected <createdAt>_<24 hex job id>")
        try:
            return cls(parse_time(created), job_id.lower())
        except ValueError:
            raise CursorError(f"malformed cursor {shorten(text)!r}: its time is not RFC 3339") from None

    def __str__(self) -> str:
        return f"{format_time(self.createdAt)}_{self.id}"


@dataclass(frozen=True)
class JobQuery:
    """What one page of a tenant's jobs holds, newest first. `before`: the page after the cursor (older jobs);
    `after`: the page just before it (newer jobs), still listed newest first. At most one of the two."""

    status: Status | None = None
    jobType: str | None = None
    templateId: str | None = None  # the runs of one template
    templates: bool | None = None  # True: templates only; False: one-off jobs and runs only
    limit: int = 100
    before: PageCursor | None = None
    after: PageCursor | None = None


@dataclass(frozen=True)
class RecentCounts:
    """One job type's last-hour figures: jobs completed, attempts failed (failed, timed out or lost), jobs
    dead-lettered."""

    completed: int = 0
    failed: int = 0
    dlq: int = 0


@dataclass(frozen=True)
class Counts:
    """Jobs (templates apart) by type and status, the last hour's figures by type, and the templates that are
    active (pending, firing) and paused (pending, not firing until resumed), of one tenant or all."""

    byType: dict[str, dict[str, int]] = field(default_factory=dict)
    lastHour: dict[str, RecentCounts] = field(default_factory=dict)
    activeTemplates: int = 0
    pausedTemplates: int = 0


@dataclass(frozen=True)
class ErrorGroup:
    """Dead-lettered jobs that share one lastError."""

    error: str
    count: int
    jobTypes: list[str]


def counts_from(
    by_status: Iterable[tuple[str, str, int]],
    templates: Iterable[tuple[str, str, int]],
    ended: Iterable[tuple[str, str, int]],
    failed: Iterable[tuple[str, int]],
    paused_templates: int,
) -> Counts:
    """Counts from rows: (jobType, status, jobs) of every job and of the templates among them (templates are
    counted as schedules, not as jobs), the last hour's (jobType, completed|dlq, jobs), and the last hour's
    (jobType, failed attempts); `paused_templates` of the pending templates are paused."""
    by_type: dict[str, dict[str, int]] = defaultdict(dict)
    for job_type, status, count in by_status:
        by_type[job_type][status] = count
    active_templates = 0
    for job_type, status, count in templates:
        left = by_type[job_type].get(status, 0) - count
        if left > 0:
            by_type[job_type][status] = left
        else:
            by_type[job_type].pop(status, None)
        if status == Status.PENDING.value:
            active_templates += count
    recent: dict[str, dict[str, int]] = defaultdict(dict)
    for job_type, status, count in ended:
        recent[job_type][status] = count
    for job_type, count in failed:
        recent[job_type]["failed"] = recent[job_type].get("failed", 0) + count
    last_hour = {
        t: RecentCounts(completed=c.get(Status.COMPLETED.value, 0), failed=c.get("failed", 0), dlq=c.get("dlq", 0))
        for t, c in recent.items()
    }
    return Counts(
        byType={t: c for t, c in by_type.items() if c},
        lastHour=last_hour,
        activeTemplates=active_templates - paused_templates,
        pausedTemplates=paused_templates,
    )


def error_groups(rows: Iterable[tuple[str | None, str, int]], limit: int) -> list[ErrorGroup]:
    """Groups from (lastError, jobType, count) rows, largest first, then by error text."""
    counts: dict[str, int] = defaultdict(int)
    types: dict[str, set[str]] = defaultdict(set)
    for error, job_type, count in rows:
        counts[error or ""] += count
        types[error or ""].add(job_type)
    ranked = sorted(counts, key=lambda e: (-counts[e], e))[: max(limit, 0)]
    return [ErrorGroup(error=e, count=counts[e], jobTypes=sorted(types[e])) for e in ranked]


class JobBrowser(Protocol):
    """Every method names its tenant `tenant_id` (None: every tenant), which is what the API's tenant guard
    checks against the caller's key when authentication is on."""

    def page(self, tenant_id: str, query: JobQuery) -> list[Job]:
        """One page of the tenant's jobs as `query` asks, newest first (createdAt desc, then id desc)."""

    def counts(self, tenant_id: str | None, since: datetime) -> Counts:
        """Jobs by type and status (templates apart); completed, failed attempts and dead letters since `since`;
        active and paused templates."""

    def tenants(self, tenant_id: str | None, limit: int) -> list[str]:
        """Up to `limit` tenant ids that have jobs, in order; only `tenant_id` (if it has jobs) when given: the
        tenants a caller scoped to one may see."""

    def dlq_groups(self, tenant_id: str | None, limit: int) -> list[ErrorGroup]:
        """The dead letters grouped by lastError, largest group first (then by error), at most `limit` groups."""

    def dead_letters(self, tenant_id: str | None, error: str, limit: int) -> list[Job]:
        """Up to `limit` dead-lettered jobs whose lastError is `error`, most recently dead-lettered first."""

    def history(self, tenant_id: str | None, job_type: str | None, since: datetime, until: datetime) -> History:
        """Minute by minute from `since`'s minute to `until`'s (at most a day back from now), of one job type or
        all of them: what the stores' per-minute counters hold (shared/store/history.py), never counted from
        the jobs."""
