"""The job-type registry seam: which job types live executors serve, kept in the store beside the jobs.

The API, the schedulers and the executors run in different processes that may not import the same handler
modules. Executors announce the types they serve with a heartbeat (each announcement is live until a time the
executor renews before it passes); the API accepts jobs of announced types and the scheduler claims jobs of
types with a live executor. One record per (type, executor): every executor writes only its own records, so
no two writers ever update the same document (an update there is not atomic on every Mongo-compatible
server). Implementations: job_types.py of shared/store/sqlite/ and of shared/store/mongo/; contract:
tests/contract/test_type_registry.py.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from jobsched.limits import Limits
from jobsched.type_defaults import TypeDefaults
from shared.model import format_time

log = logging.getLogger("jobsched.limits")


@dataclass(frozen=True)
class JobTypeInfo:
    """One job type as announced: how many executors serve it now, when it was last announced, and the defaults
    of its latest announcement."""

    name: str
    executors: int
    lastSeenAt: datetime
    defaults: TypeDefaults

    def to_wire(self) -> dict[str, Any]:
        return {"name": self.name, "executors": self.executors, "lastSeenAt": format_time(self.lastSeenAt)}


@dataclass(frozen=True)
class Announcement:
    """One executor's record for one type, as stored."""

    jobType: str
    executor: str
    seenAt: datetime
    liveUntil: datetime
    defaults: TypeDefaults


class JobTypeRegistry(Protocol):
    def announce(self, executor: str, types: Mapping[str, TypeDefaults], now: datetime, live_until: datetime) -> None:
        """Record that `executor` serves these types, seen at `now` and live until `live_until` (its heartbeat
        announces again before then). Idempotent; only this executor's records are written."""

    def withdraw(self, executor: str, now: datetime) -> None:
        """The executor stops: its records stop counting as live at `now`; the types stay known."""

    def job_types(self, now: datetime, seen_since: datetime) -> list[JobTypeInfo]:
        """Every type announced at or after `seen_since`, by name, with its live executors at `now`."""

    def announcements(self, job_type: str) -> list[Announcement]:
        """Every executor's record for `job_type`, live or not (a few: one per executor that served it lately)."""

    def forget(self, seen_before: datetime) -> int:
        """Delete records last announced before `seen_before` (executors long gone); return how many."""

    def waiting_runs(self, now: datetime, job_type: str) -> int:
        """How many runs of `job_type` are pending and due at `now` (jobs waiting for an executor)."""

    def set_limits(self, job_type: str, limits: Limits | None, now: datetime) -> None:
        """An operator's limits for `job_type`, in place of the ones its executors register (None: theirs again).
        The type's start rate starts afresh: starts reserved or made under the old rate (a slow one, reaching hours
        ahead) no longer hold it back."""

    def limit_overrides(self) -> dict[str, Limits]:
        """Every type's operator limits (set_limits)."""


def summarize(records: Iterable[Announcement], now: datetime) -> list[JobTypeInfo]:
    """Records grouped by type, in name order: the one rule of every store for "live" and "last seen"."""
    by_type: dict[str, list[Announcement]] = {}
    for record in records:
        by_type.setdefault(record.jobType, []).append(record)
    infos = []
    for name in sorted(by_type):
        group = by_type[name]
        latest = max(group, key=lambda r: (r.seenAt, r.executor))
        live = sum(1 for r in group if r.liveUntil > now)
        infos.append(JobTypeInfo(name=name, executors=live, lastSeenAt=latest.seenAt, defaults=latest.defaults))
    return infos


def readable_overrides(stored: Iterable[tuple[str, Any]]) -> dict[str, Limits]:
    """Operators' limits as stored, by type; one this version cannot read (a newer field, a hand edit) is left out
    and logged, not allowed to stop every claim."""
    found: dict[str, Limits] = {}
    for job_type, doc in stored:
        try:
            found[job_type] = Limits.from_document(doc)
        except (TypeError, ValueError) as exc:
            log.error(
                "limits not readable", extra={"action": "limits_unreadable", "jobType": job_type, "error": str(exc)}
            )
    return found
