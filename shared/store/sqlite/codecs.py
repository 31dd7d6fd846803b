"""What a value is in the SQLite file and back: times (INTEGER unix milliseconds, UTC), a row as a Job or an
Execution, a transition's values as SQL parameters (JSON text for the payload, the results and a job's backoff),
and the small helpers that write a statement's placeholders, chunks and SET clause."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from jobsched.backoff import backoff_document, backoff_from_document
from shared.model import Execution, Job, Outcome, Status, job_from_fields
from shared.store import transitions
from shared.store.sqlite.schema import BOOL_COLUMNS, JSON_COLUMNS, TIME_COLUMNS

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)

# --- times ------------------------------------------------------------------------------------------------


def to_ms(moment: datetime) -> int:
    """Unix milliseconds, truncated like BSON dates; a naive datetime is taken as UTC (as pymongo does)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def from_ms(ms: int) -> datetime:
    return _EPOCH + timedelta(0, 0, ms * 1000)  # positional microseconds: twice as fast as milliseconds=


# --- rows -------------------------------------------------------------------------------------------------


def _from_row(row: sqlite3.Row) -> dict[str, Any]:
    values = dict(zip(row.keys(), tuple(row), strict=True))
    for key in TIME_COLUMNS.intersection(values):
        if values[key] is not None:
            values[key] = from_ms(values[key])
    return values


def to_job(row: sqlite3.Row) -> Job:
    return job_from_values(dict(zip(row.keys(), row, strict=True)))


def job_from_values(values: dict[str, Any]) -> Job:
    """The job a row's column values hold (taken over, not copied)."""
    values.pop("kind", None)  # the store's own column, not a job field
    for key in TIME_COLUMNS.intersection(values):
        if values[key] is not None:
            values[key] = from_ms(values[key])
    values["status"] = Status(values["status"])
    values["payload"] = json.loads(values["payload"])
    for key in JSON_COLUMNS.intersection(values):
        if values[key] is not None:
            values[key] = json.loads(values[key])
    for key in BOOL_COLUMNS.intersection(values):
        if values[key] is not None:
            values[key] = bool(values[key])
    if values.get("backoff") is not None:
        values["backoff"] = backoff_from_document(json.loads(values["backoff"]))
    return job_from_fields(values)


def to_execution(row: sqlite3.Row) -> Execution:
    values = _from_row(row)
    values["outcome"] = Outcome(values["outcome"])
    if values.get("result") is not None:
        values["result"] = json.loads(values["result"])
    return Execution(**values)


# --- values and statements ----------------------------------------------------------------------------------


def to_sql(key: str, value: Any) -> Any:
    if value is transitions.UNSET:
        return None
    if isinstance(value, datetime):
        return to_ms(value)
    if key == "payload":
        return value if isinstance(value, str) else payload_text(value)  # a str: written already
    if key in JSON_COLUMNS and value is not None:
        return payload_text(value)
    if key == "backoff" and value is not None:
        return json.dumps(backoff_document(value), separators=(",", ":"))
    return value


def payload_text(payload: Any) -> str:
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate that an older version stored, copied into a new row (a run of its template): SQLite
        # takes only UTF-8 text, so it is kept as its \u escape, which reads back as the same value.
        text = json.dumps(payload, separators=(",", ":"))
    return text


def assignments(fields: transitions.Fields, columns: frozenset[str]) -> tuple[str, list[Any]]:
    check_columns(fields, columns)
    return ", ".join(f"{k} = ?" for k in fields), [to_sql(k, v) for k, v in fields.items()]


def check_columns(fields: transitions.Fields, columns: frozenset[str]) -> None:
    # Column names are interpolated into SQL: only our own, known names may get there.
    unknown = set(fields) - columns
    if unknown:
        raise ValueError(f"unknown columns {sorted(unknown)}")


def marks(values: Sequence[object]) -> str:
    return ", ".join("?" * len(values))


def chunks(ids: list[str], size: int = 500) -> Iterator[list[str]]:
    for start in range(0, len(ids), size):
        yield ids[start : start + size]
