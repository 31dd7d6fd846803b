"""The transitions of one job inside a write transaction of the SQLite file: creating jobs (their keys decide
who owns them), starting and closing an attempt (guarded updates of its job decide who owns it), and the row-level
reads and guarded writes they are made of. Each takes the connection of the caller's write transaction
(SqliteDatabase.write), whose lock keeps what it read true until COMMIT."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, Final, NamedTuple, TypeVar

from bson import ObjectId

from jobsched.limits import Rate
from shared.model import Job, Outcome, Status, utc_now
from shared.store import transitions
from shared.store.base import (
    AttemptResult,
    AttemptStart,
    DuplicateJob,
    JobNotFound,
    NewJob,
    RunSpec,
    StoreError,
    TransitionRefused,
)
from shared.store.claim_limits import KeyOwner
from shared.store.sqlite import minutes
from shared.store.sqlite.codecs import (
    assignments,
    check_columns,
    chunks,
    folded_rows,
    job_from_values,
    marks,
    payload_text,
    stored_id,
    to_job,
    to_ms,
    to_sql,
)
from shared.store.sqlite.schema import EXECUTION_COLUMNS, JOB_COLUMNS
from shared.store.start_rates import counted_starts
from shared.store.transitions import ATTEMPT_ACTIVE, CANCELLABLE_VALUES, attempt_record_id

RUNS_PER_TRANSACTION: Final = 500
CLOSINGS_PER_STATEMENT: Final = 200  # well within SQLite's 32,766 parameters at up to 11 values each
TRANSACTION_BYTES: Final = 4 * 1024 * 1024
T = TypeVar("T")

# The guards of the transitions that need a job in one of several statuses (their values follow as parameters).
IS_CANCELLABLE: Final = f"status IN ({', '.join('?' * len(CANCELLABLE_VALUES))})"  # + CANCELLABLE_VALUES
IS_ACTIVE: Final = f"status IN ({', '.join('?' * len(ATTEMPT_ACTIVE))})"  # + ATTEMPT_ACTIVE
# A job an executor may start (+ QUEUED, the executor's type): transitions.check_startable's condition. The job
# alone decides who owns an attempt (transitions: a start moves it only while it is queued).
_STARTABLE: Final = "status = ? AND jobType = ?"
_RUNNING: Final = Outcome.RUNNING.value  # the outcome of a record an earlier version inserted at the start
_DUPLICATE_CODES: Final = frozenset({sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY})


def refused_before_writing(step: Callable[[], T]) -> T | StoreError:
    """Run one request's statements of a shared transaction whose refusals (a StoreError: not found, not
    startable, rate limited) are all decided before its first write: a refusal is its own result rather than the
    batch's and leaves nothing to undo, so it needs no savepoint (two statements more per request). Anything
    else rolls back the whole transaction."""
    try:
        return step()
    except StoreError as exc:
        return exc


def created(
    conn: sqlite3.Connection, news: Sequence[NewJob], store_columns: Sequence[transitions.Fields] = ()
) -> list[Job | StoreError]:
    """The jobs inserted by multi-row INSERTs that skip a row whose unique key is taken (ON CONFLICT DO NOTHING:
    the first of two rows with one key wins, as the first of two creates would); each skipped job is answered
    DuplicateJob naming the key's holder. The created jobs are made from the values written, not read back.
    `store_columns`: per job, values of the file's own columns (schema.STORE_COLUMNS) to write with it."""
    now = utc_now()
    rows = [{"id": str(ObjectId()), **transitions.new_job(new, new.createdAt or now)} for new in news]
    for row, own in zip(rows, store_columns, strict=False):
        row.update(own)
    columns = sorted(set().union(*rows))
    check_columns(dict.fromkeys(columns), JOB_COLUMNS)
    per_statement = max(1, conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // len(columns))
    values = [[to_sql(c, row.get(c)) for c in columns] for row in rows]
    inserted: set[str] = set()
    for start in range(0, len(rows), per_statement):
        chunk = values[start : start + per_statement]
        tuples = ", ".join([f"({marks(columns)})"] * len(chunk))
        sql = f"INSERT INTO jobs ({', '.join(columns)}) VALUES {tuples} ON CONFLICT DO NOTHING RETURNING id"
        inserted.update(str(r[0]) for r in conn.execute(sql, [v for row in chunk for v in row]))
    holders = _holders(conn, [new for new, row in zip(news, rows, strict=True) if row["id"] not in inserted])
    answers: list[Job | StoreError] = []
    id_column = columns.index("id")
    for new, row_values in zip(news, values, strict=True):
        if row_values[id_column] in inserted:
            answers.append(job_from_values(dict(zip(columns, row_values, strict=True))))
        else:
            answers.append(DuplicateJob(new.idempotencyKey, holders.get((new.tenantId, new.idempotencyKey))))
    return answers


def _holders(conn: sqlite3.Connection, news: Sequence[NewJob]) -> dict[tuple[str, str], str]:
    """The ids of the jobs that hold these jobs' keys, by (tenant, key)."""
    found: dict[tuple[str, str], str] = {}
    for new in news:
        row = conn.execute(
            "SELECT id FROM jobs WHERE tenantId = ? AND idempotencyKey = ?", (new.tenantId, new.idempotencyKey)
        ).fetchone()
        if row is not None:
            found[(new.tenantId, new.idempotencyKey)] = str(row[0])
    return found


def start_batch(conn: sqlite3.Connection, now: datetime, starts: Sequence[AttemptStart]) -> list[str | StoreError]:
    """start_attempts' writes, each start refused or made on its own: the started job's id as rows keep it (its
    row is read by the caller once the write lock is released), or why it was refused. The starts without a
    start rate (the usual case: one executor's batch, one type, worker and lease) are made together (one read,
    one UPDATE); a rated start is counted against its rate one at a time (start_one)."""
    answers: list[str | StoreError | None] = [None] * len(starts)
    together: dict[tuple[str, str, datetime], dict[str, int]] = {}
    for index, start in enumerate(starts):
        job_id = stored_id(start.job_id)
        if job_id is None:
            answers[index] = JobNotFound(start.job_id)
        elif start.rate is not None or start.key_rate is not None:
            answers[index] = refused_before_writing(partial(start_one, conn, now, start, job_id))
        else:  # a second start of one job in the batch is refused as it would be after the first
            together.setdefault((start.job_type, start.worker, start.lease_until), {}).setdefault(job_id, index)
    for (job_type, worker, lease_until), indexes in together.items():
        started = _start_together(conn, now, job_type, worker, lease_until, list(indexes))
        for job_id, index in indexes.items():
            if job_id in started:
                answers[index] = job_id
    for index, answer in enumerate(answers):
        if answer is None:
            answers[index] = _start_refused(conn, stored_id(starts[index].job_id), starts[index])
    return answers  # type: ignore[return-value]  # every None was answered above


class _Started(NamedTuple):
    """A job a start moves, as the history's minutes count it."""

    id: str
    tenantId: str
    jobType: str
    scheduledAt: int


def _start_together(
    conn: sqlite3.Connection, now: datetime, job_type: str, worker: str, lease_until: datetime, job_ids: list[str]
) -> set[str]:
    """The startable jobs among `job_ids` moved queued → running, by statements that answer in one step each
    (codecs.folded_rows): the ids started."""
    set_sql, set_params = assignments(transitions.started(worker, now, lease_until), JOB_COLUMNS)
    started: list[_Started] = []
    queued = Status.QUEUED.value
    for chunk in chunks(job_ids):
        where = f"FROM jobs WHERE id IN ({marks(chunk)}) AND {_STARTABLE}"
        startable = folded_rows(conn, _Started._fields, where, [*chunk, queued, job_type])
        if not startable:
            continue
        ids = [job[0] for job in startable]
        moved = guarded_update(
            conn, f"UPDATE jobs SET {set_sql} WHERE id IN ({marks(ids)}) AND status = ?", [*set_params, *ids, queued]
        )
        assert moved.rowcount == len(ids), "the write lock was held since the startable jobs were read"
        started += (_Started(*job) for job in startable)
    minutes.count_starts(conn, to_ms(now), ((job.tenantId, job.jobType, job.scheduledAt) for job in started))
    return {job.id for job in started}


def start_one(conn: sqlite3.Connection, now: datetime, start: AttemptStart, job_id: str) -> str:
    """A start counted against its type's start rate (and its key's): the job (`job_id`, start.job_id as rows
    keep it) moves queued → running in one update, made only when it is startable (check_startable's
    condition). A refusal writes nothing; its reason is read only then."""
    fields = transitions.started(start.worker, now, start.lease_until)
    started_until = _rate_allows(conn, start, now) if start.rate is not None else None
    key_started = _key_rate_allows(conn, start, job_id, now) if start.key_rate is not None else None
    row = update_job(conn, job_id, fields, _STARTABLE, (Status.QUEUED.value, start.job_type))
    if row is None:
        raise _start_refused(conn, job_id, start)
    if started_until is not None:
        conn.execute(
            "INSERT INTO rate_limits (jobType, claimTat, startTat) VALUES (?, 0, ?) "
            "ON CONFLICT (jobType) DO UPDATE SET startTat = excluded.startTat",
            (start.job_type, started_until),
        )
    if key_started is not None:
        owner, tat = key_started
        conn.execute(
            "INSERT INTO key_rate_limits (jobType, tenantId, concurrencyKey, claimTat, startTat) "
            "VALUES (?, ?, ?, 0, ?) ON CONFLICT DO UPDATE SET startTat = excluded.startTat",
            (*owner, tat),
        )
    minutes.count_starts(conn, to_ms(now), [(row["tenantId"], row["jobType"], row["scheduledAt"])])
    return job_id


def _rate_allows(conn: sqlite3.Connection, start: AttemptStart, now: datetime) -> float:
    """The type's starts after this one when its rate allows it now; RateLimited
    otherwise. Only reads: the caller writes it once the start is made."""
    assert start.rate is not None
    row = conn.execute("SELECT startTat FROM rate_limits WHERE jobType = ?", (start.job_type,)).fetchone()
    return _counted_start(float(row[0]) if row else 0.0, now, start.rate, start.job_type)


def _key_rate_allows(
    conn: sqlite3.Connection, start: AttemptStart, job_id: str, now: datetime
) -> tuple[KeyOwner, float] | None:
    """As _rate_allows, for the job's concurrency key under the type's rate per key (None: the job has no key, or
    is not there: the start's own checks name why)."""
    assert start.key_rate is not None
    job = conn.execute("SELECT tenantId, concurrencyKey FROM jobs WHERE id = ?", (job_id,)).fetchone()
    if job is None or job[1] is None:
        return None
    owner: KeyOwner = (start.job_type, str(job[0]), str(job[1]))
    row = conn.execute(
        "SELECT startTat FROM key_rate_limits WHERE jobType = ? AND tenantId = ? AND concurrencyKey = ?", owner
    ).fetchone()
    return owner, _counted_start(float(row[0]) if row else 0.0, now, start.key_rate, start.job_type)


def _counted_start(tat: float, now: datetime, rate: Rate, job_type: str) -> float:
    """How far the starts reach with this one (start_rates.counted_starts); RateLimited when it may not start."""
    (refused,), reached = counted_starts(tat, now, rate, 1, job_type)
    if refused is not None:
        raise refused
    return reached


def _start_refused(conn: sqlite3.Connection, job_id: str | None, start: AttemptStart) -> StoreError:
    job = load_job(conn, job_id) if job_id is not None else None
    if job is None:
        return JobNotFound(start.job_id)
    try:
        transitions.check_startable(job, start.job_type)
    except TransitionRefused as refused:
        return refused
    raise AssertionError("the write lock was held since the start's guard found the job not startable")


@dataclass(frozen=True)
class Closing:
    """An attempt's closing, its record's and its job's new values converted for SQL ahead (`closing_of`), so that
    a batch of them holds the write lock only while it writes."""

    job: Job
    result: AttemptResult
    record_id: str
    record: dict[str, Any]  # the record's columns and values, its id and job's included
    fields: transitions.Fields  # the job's, as the transition gives them
    job_values: dict[str, Any]  # the same, as SQL values


def closing_of(job: Job, result: AttemptResult) -> Closing:
    record_id = attempt_record_id(job.id, job.next_attempt)
    record = {"id": record_id, "jobId": job.id, **transitions.attempt_record(job, result)}
    fields = transitions.attempt_closed(job, result)
    check_columns(record, EXECUTION_COLUMNS)
    check_columns(fields, JOB_COLUMNS)
    return Closing(
        job,
        result,
        record_id,
        {k: to_sql(k, v) for k, v in record.items()},
        fields,
        {k: to_sql(k, v) for k, v in fields.items()},
    )


def close_attempts(conn: sqlite3.Connection, closings: Sequence[Closing]) -> list[Closing | None]:
    """Decide each attempt's one outcome on its job: the first closer (the executor's result or the reaper's
    "lost") finds the job still in that attempt (claimed or running with attempt-1 attempts made) and moves it on;
    every later one finds it moved and changes nothing (None; so does a second closing of one attempt in the
    batch). What was written: the closing, made again for a job whose cancel was asked after it was read (then no
    retry). The open jobs are read in one step (codecs.folded_rows), then moved, and the attempts' records
    inserted, by one statement per chunk of closings that set the same columns (a batch of successes: one each)."""
    firsts: dict[str, int] = {}
    for index, closing in enumerate(closings):
        firsts.setdefault(closing.record_id, index)
    answers: list[Closing | None] = [None] * len(closings)
    for chunk in chunks(list(firsts.values())):
        ids = [closings[i].job.id for i in chunk]
        where = f"FROM jobs WHERE id IN ({marks(ids)}) AND {IS_ACTIVE}"
        open_jobs = folded_rows(conn, ("id", "attempts", "cancelRequested"), where, [*ids, *ATTEMPT_ACTIVE])
        in_attempt = {(job_id, attempts): cancel for job_id, attempts, cancel in open_jobs}
        for index in chunk:
            closing = closings[index]
            key = (closing.job.id, closing.job.attempts)
            if key not in in_attempt:
                continue  # the job is no longer in that attempt: another closer decided it
            if in_attempt[key] and not closing.job.cancelRequested:
                closing = closing_of(closing.job.evolve(cancelRequested=True), closing.result)
            answers[index] = closing
    decided = [closing for closing in answers if closing is not None]
    moved = 0
    for same in _same_columns(decided, lambda c: c.job_values):
        moved += _update_from_values(
            conn,
            [(c.job.id, c.job.attempts, *c.job_values.values()) for c in same],
            list(same[0].job_values),
            f"jobs.id = closing._key AND jobs.attempts = closing._attempts AND jobs.{IS_ACTIVE}",
            list(ATTEMPT_ACTIVE),
        )
    assert moved == len(decided), "the write lock was held since the open jobs were read"
    for same in _same_columns(decided, lambda c: c.record):
        columns = list(same[0].record)
        # A record already there is one that an earlier version inserted when it started the attempt (`running`,
        # its worker and start the job's too): completed in place, so that the file needs no migration.
        written = conn.execute(
            f"INSERT INTO executions ({', '.join(columns)}) VALUES {', '.join([f'({marks(columns)})'] * len(same))} "
            f"ON CONFLICT (id) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in columns)} WHERE outcome = ?",
            [*(value for closing in same for value in closing.record.values()), _RUNNING],
        )
        assert written.rowcount == len(same), "an attempt's record was closed while its job was in that attempt"
    return answers


def _same_columns(items: list[T], values: Callable[[T], dict[str, Any]]) -> Iterator[Sequence[T]]:
    groups: dict[tuple[str, ...], list[T]] = {}
    for item in items:
        groups.setdefault(tuple(values(item)), []).append(item)
    for group in groups.values():
        yield from chunks(group, CLOSINGS_PER_STATEMENT)


def update_jobs(conn: sqlite3.Connection, moves: dict[str, transitions.Fields], guard: str, params: list[Any]) -> None:
    """Each job of `moves` (its id: the fields to write) moved where `guard` (on `jobs`) holds, by one statement per
    chunk of moves that set the same columns: a parent's end releases thousands of dependents in its transaction.
    The caller read every one of them under the write lock, where `guard` held: each moves."""
    moved = 0
    for chunk in _same_columns(list(moves.items()), lambda move: move[1]):
        columns = list(chunk[0][1])
        check_columns(dict.fromkeys(columns), JOB_COLUMNS)
        rows = [(job_id, 0, *(to_sql(c, fields[c]) for c in columns)) for job_id, fields in chunk]
        moved += _update_from_values(conn, rows, columns, f"jobs.id = closing._key AND {guard}", params)
    assert moved == len(moves), "the write lock was held since the jobs were read"


def _update_from_values(
    conn: sqlite3.Connection, rows: list[tuple[Any, ...]], columns: list[str], where: str, where_params: list[Any]
) -> int:
    """One UPDATE of the jobs from the rows `(_key, _attempts, *values of columns)` (as `closing`), each setting
    its own values where `where` holds: how many it moved. It returns no rows (each would be a step of the
    statement, and a release of the GIL, inside the write lock)."""
    tuples = ", ".join([f"({marks(rows[0])})"] * len(rows))
    sql = f"""WITH closing(_key, _attempts, {", ".join(columns)}) AS (VALUES {tuples})
        UPDATE jobs SET {", ".join(f"{c} = closing.{c}" for c in columns)} FROM closing WHERE {where}"""
    guarded_update(conn, sql, [v for row in rows for v in row] + where_params)
    moved: int = conn.execute("SELECT changes()").fetchone()[0]  # (rowcount: -1 for a statement WITH ...)
    return moved


def close_attempt(conn: sqlite3.Connection, closing: Closing) -> Closing | None:
    return close_attempts(conn, [closing])[0]


def closed(closing: Closing | None) -> Job | None:
    """The job as close_attempts left it (None: the attempt was closed already)."""
    return transitions.applied(closing.job, closing.fields) if closing is not None else None


# --- row helpers ------------------------------------------------------------------------------------------


def load_job(conn: sqlite3.Connection, job_id: str) -> Job | None:
    """The job of that id (any case), or None, also for an id that is no ObjectId."""
    row = conn.execute("SELECT * FROM jobs WHERE id = ?", (stored_id(job_id),)).fetchone()
    return to_job(row) if row else None


def runs_after(run: Job | None) -> tuple[str, list[Any]]:
    """The condition for the runs listed after `run` in template_runs' order (SQLite sorts NULL lowest, so runs
    without plannedAt come last, as in MongoDB)."""
    if run is None:
        return "", []
    scheduled = to_ms(run.scheduledAt)
    same_planned = "(scheduledAt < ? OR (scheduledAt = ? AND id < ?))"
    if run.plannedAt is None:
        return f"AND plannedAt IS NULL AND {same_planned}", [scheduled, scheduled, run.id]
    planned = to_ms(run.plannedAt)
    return (
        f"AND (plannedAt IS NULL OR plannedAt < ? OR (plannedAt = ? AND {same_planned}))",
        [planned, planned, scheduled, scheduled, run.id],
    )


def transactions_of(template: Job, runs: Sequence[RunSpec], now: datetime) -> Iterator[list[transitions.Fields]]:
    """The runs' rows a transaction's worth at a time (RUNS_PER_TRANSACTION, or TRANSACTION_BYTES of payload),
    so that a backfill's thousands of runs let the executor's writes through between them and never sit in
    memory all at once. Runs share their template's payload: it is written to JSON once."""
    texts: dict[int, str] = {}
    batch: list[transitions.Fields] = []
    size = 0
    for run in runs:
        fields = {"id": str(ObjectId()), **transitions.template_run(template, run, now)}
        payload = fields["payload"]
        if id(payload) not in texts:
            texts[id(payload)] = payload_text(payload)
        fields["payload"] = texts[id(payload)]
        batch.append(fields)
        size += len(fields["payload"])
        if len(batch) == RUNS_PER_TRANSACTION or size >= TRANSACTION_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def insert_unique(
    conn: sqlite3.Connection, table: str, fields: transitions.Fields, returning: str = "*"
) -> sqlite3.Row | None:
    """Insert a row and return it (its `returning` columns), or None when its unique key (id; tenantId +
    idempotencyKey) is taken: the atomic "who owns this" decision of every store."""
    columns = JOB_COLUMNS if table == "jobs" else EXECUTION_COLUMNS
    check_columns(fields, columns)
    values = [to_sql(k, v) for k, v in fields.items()]
    try:
        row: sqlite3.Row = conn.execute(
            f"INSERT INTO {table} ({', '.join(fields)}) VALUES ({marks(values)}) RETURNING {returning}", values
        ).fetchone()
    except sqlite3.IntegrityError as exc:
        if getattr(exc, "sqlite_errorcode", None) in _DUPLICATE_CODES:
            return None
        raise
    return row


def update_job(
    conn: sqlite3.Connection,
    job_id: str,
    fields: transitions.Fields,
    guard: str,
    guard_params: Sequence[Any],
    returning: str = "*",
) -> sqlite3.Row | None:
    """Apply a transition's fields to one job if `guard` (the compare of compare-and-set) still holds;
    the updated row (its `returning` columns), or None when it does not."""
    set_sql, set_params = assignments(fields, JOB_COLUMNS)
    sql = f"UPDATE jobs SET {set_sql} WHERE id = ? AND {guard} RETURNING {returning}"
    row: sqlite3.Row | None = guarded_update(conn, sql, [*set_params, job_id, *guard_params]).fetchone()
    return row


def guarded_update(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> sqlite3.Cursor:
    """Every conditional write of jobs goes through here (the contract suite fails one of them on purpose)."""
    return conn.execute(sql, params)
