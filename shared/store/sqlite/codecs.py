"""What a value is in the SQLite file and back: times (INTEGER unix milliseconds, UTC), a row as a Job or an
Execution, a transition's values as SQL parameters (JSON text for the payload, the results and a job's backoff),
and the small helpers that write a statement's placeholders, chunks and SET clause."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TypeVar, overload

from jobsched.backoff import backoff_document, backoff_from_document
from shared.model import Execution, Job, Outcome, Status, job_from_fields, missing_job_defaults
from shared.store import transitions
from shared.store.fair_claims import Claimed
from shared.store.sqlite.schema import BOOL_COLUMNS, JSON_COLUMNS, STORE_COLUMNS, TIME_COLUMNS

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_OBJECT_ID: Final = re.compile("[0-9a-fA-F]{24}")
T = TypeVar("T")


def stored_id(job_id: str) -> str | None:
    """The id as rows keep it (an ObjectId's lower-case hex: a lookup ignores case, as MongoDB's does), or None
    when `job_id` is no ObjectId. (A match costs a tenth of bson's ObjectId(job_id), made per start.)"""
    return job_id.lower() if _OBJECT_ID.fullmatch(job_id) else None


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


def job_reader(row: sqlite3.Row) -> Callable[[sqlite3.Row], Job]:
    """to_job for the rows of one statement (those of `row`'s columns): the columns' names and what converting
    them takes are worked out once, not per row (a list of 45 names, a tuple hashed, a dict looked up)."""
    names = tuple(row.keys())
    columns = _columns(names)
    return lambda row: job_from_values(dict(zip(names, row, strict=True)), columns)


def to_jobs(rows: Sequence[sqlite3.Row]) -> list[Job]:
    """The jobs of one statement's rows."""
    if not rows:
        return []
    read = job_reader(rows[0])
    return [read(row) for row in rows]


@dataclass(frozen=True)
class _Columns:
    """What converting a row of these columns takes, worked out once per list of columns (a statement's)."""

    times: tuple[str, ...]
    json: tuple[str, ...]
    bools: tuple[str, ...]
    defaults: dict[str, Any] | None  # those of the Job fields the columns lack (None: job_from_fields decides)


_COLUMNS: dict[tuple[str, ...], _Columns] = {}
_STATUSES: Final = {status.value: status for status in Status}


def _columns(names: tuple[str, ...]) -> _Columns:
    found = _COLUMNS.get(names)
    if found is None:
        found = _COLUMNS[names] = _Columns(
            tuple(n for n in names if n in TIME_COLUMNS),
            tuple(n for n in names if n in JSON_COLUMNS),
            tuple(n for n in names if n in BOOL_COLUMNS),
            missing_job_defaults([n for n in names if n not in STORE_COLUMNS]),
        )
    return found


def job_from_values(values: dict[str, Any], columns: _Columns | None = None) -> Job:
    """The job a row's column values hold (taken over, not copied; `columns`: _columns of its keys, if known).
    Every job a store returns is made here (two per attempt at least), so it does per row only what the row
    needs."""
    if columns is None:
        columns = _columns(tuple(values))
    for column in STORE_COLUMNS:  # the file's own columns, not job fields
        values.pop(column, None)
    for key in columns.times:
        if (ms := values[key]) is not None:
            values[key] = from_ms(ms)
    values["status"] = _STATUSES[values["status"]]
    values["payload"] = json.loads(values["payload"])
    for key in columns.json:
        if (text := values[key]) is not None:
            values[key] = json.loads(text)
    for key in columns.bools:
        if (flag := values[key]) is not None:
            values[key] = bool(flag)
    if values.get("backoff") is not None:
        values["backoff"] = backoff_from_document(json.loads(values["backoff"]))
    if columns.defaults is None:
        return job_from_fields(values)
    job = object.__new__(Job)  # as job_from_fields does, its checks made once for these columns
    job.__dict__.update(columns.defaults)
    job.__dict__.update(values)
    return job


def folded_rows(
    conn: sqlite3.Connection, columns: Sequence[str], from_sql: str, params: Sequence[Any] | Mapping[str, Any]
) -> list[Any]:
    """The rows of `SELECT columns from_sql`, each a list of its values (JSON's: TEXT, INTEGER, REAL or NULL), folded
    by SQLite into one JSON array, so that the statement answers in one step. Inside the write lock every row a
    statement returns is a step of sqlite3, and each step gives up the GIL: with other threads waiting for it, the
    writer then waits to get it back while every other writer waits for the lock it holds. In no given order."""
    (text,) = conn.execute(f"SELECT json_group_array(json_array({', '.join(columns)})) {from_sql}", params).fetchone()
    rows: list[Any] = json.loads(text)
    return rows


def jobs_in_order(conn: sqlite3.Connection, job_ids: Sequence[str]) -> list[Job]:
    """The jobs of these ids (as rows keep them), in their order; every one must be there (a job that is queued or
    running is never deleted)."""
    if not job_ids:
        return []
    rows: dict[str, sqlite3.Row] = {}
    for chunk in chunks(job_ids):
        rows.update((str(r["id"]), r) for r in conn.execute(f"SELECT * FROM jobs WHERE id IN ({marks(chunk)})", chunk))
    read = job_reader(rows[job_ids[0]])
    return [read(rows[job_id]) for job_id in job_ids]


class QueuedJobs(Sequence[Job]):
    """The jobs a claim moved to queued: their wake-ups' fields (`claimed`), read in the claim's transaction, and
    the jobs themselves, read when first asked for, after it (the scheduler publishes wake-ups, and reads a job
    only when a wake-up was not delivered). For one thread (a claim's)."""

    def __init__(self, claimed: list[Claimed], read: Callable[[list[str]], list[Job]]) -> None:
        self._claimed = claimed
        self._read = read
        self._jobs: list[Job] | None = None

    def __len__(self) -> int:
        return len(self._claimed)

    @overload
    def __getitem__(self, index: int) -> Job: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Job]: ...

    def __getitem__(self, index: int | slice) -> Job | Sequence[Job]:
        if self._jobs is None:
            self._jobs = self._read([c.id for c in self._claimed])
        return self._jobs[index]

    def claimed(self) -> list[Claimed]:
        """fair_claims.ClaimedRows: each job's wake-up fields, in claim order (SQLite keeps no claim token)."""
        return self._claimed


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


def chunks(items: Sequence[T], size: int = 500) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
