"""A schedules file, for `jobsched schedules apply FILE`: TOML, one `[[schedule]]` table per schedule.

    [[schedule]]
    name = "weekly-digest"          # its idempotency key: unique in the tenant
    job_type = "send-digest"
    cron = "0 9 * * MON"            # or interval = "15m"
    timezone = "Europe/Berlin"
    payload = { list = "all" }
    overlap = "skip"

Every other key of jobsched.Schedule may be given (priority, max_attempts, timeout, catchup, catchup_window,
jitter, start_at, end_at as TOML date-times or RFC 3339 text with an offset, pause_on_failure).
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import fields
from datetime import datetime
from pathlib import Path
from typing import Any

from jobsched.schedules import Schedule

KEYS = frozenset(f.name for f in fields(Schedule))


class ScheduleFileError(ValueError):
    """The file cannot be read as schedules: the message says where and why."""


def read_schedules(path: Path) -> list[tuple[str, Schedule]]:
    """The (job type, Schedule) pairs the file declares, in its order."""
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScheduleFileError(f"{path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ScheduleFileError(f"{path}: not TOML: {exc}") from None
    unknown = sorted(set(document) - {"schedule"})
    if unknown:
        raise ScheduleFileError(f"{path}: unknown top-level key {unknown[0]!r}; schedules are [[schedule]] tables")
    tables = document.get("schedule", [])
    if not isinstance(tables, list):
        raise ScheduleFileError(f"{path}: schedule must be an array of tables ([[schedule]])")
    return [_schedule(path, n, table) for n, table in enumerate(tables, start=1)]


def _schedule(path: Path, number: int, table: Any) -> tuple[str, Schedule]:
    if not isinstance(table, dict):
        raise ScheduleFileError(f"{path}: schedule {number} is not a table ([[schedule]] with keys)")
    where = f"{path}: schedule {number}" + (f" ({table['name']!r})" if isinstance(table.get("name"), str) else "")
    table = dict(table)
    payload = table.get("payload")
    if payload is not None and not isinstance(payload, dict):
        raise ScheduleFileError(f"{where}: payload must be a table (a JSON object)")
    try:
        json.dumps(payload)
    except (TypeError, ValueError):
        raise ScheduleFileError(
            f"{where}: payload holds a value JSON has none for (a date? write it as text)"
        ) from None
    job_type = table.pop("job_type", None)
    if not isinstance(job_type, str) or not job_type:
        raise ScheduleFileError(f"{where}: job_type is required")
    unknown = sorted(set(table) - KEYS)
    if unknown:
        raise ScheduleFileError(f"{where}: unknown key {unknown[0]!r}; known: job_type, {', '.join(sorted(KEYS))}")
    for bound in ("start_at", "end_at"):
        if isinstance(table.get(bound), str):
            table[bound] = _date_time(where, bound, table[bound])
    try:
        return job_type, Schedule(**table)
    except (TypeError, ValueError) as exc:
        raise ScheduleFileError(f"{where}: {exc}") from None


def _date_time(where: str, key: str, text: str) -> datetime:
    """A bound written as text rather than as a TOML date-time: RFC 3339, with its offset."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ScheduleFileError(f"{where}: {key} {text!r} is not a date-time (2026-12-01T00:00:00Z)") from None
    if moment.tzinfo is None:
        raise ScheduleFileError(f"{where}: {key} {text!r} has no offset: add Z or one such as +01:00") from None
    return moment
