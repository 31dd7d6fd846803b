"""Waiting jobs in the SQLite file (shared/store/dependencies.py says what a wait becomes).

Every step runs inside the write transaction of the change that calls for it, so a wait is settled in the same
commit as whatever ended its last parent: no crash can come between. A parent's end finds its waiting dependents
in one of two places, by how many parents they wait for:
- a job that waits for one parent (a chain's link, a fan-out's member) names it in its own row (`waitingOn`, in
  the `waiting_on` index, which holds only waiting jobs): it costs no write besides its row's insert and its
  release, one more than an independent job;
- a job that waits for several (a fan-in) has a row in `job_dependencies` per parent that has not ended, which
  that parent's end reads by its key and deletes: any parent's failure must reach it at once (the cancel policy),
  not only the end of the parent it would name.
A create adds those for its parents that have not ended, and settles its job against the ones that have.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from shared.model import TERMINAL, Job, Status, utc_now
from shared.store import transitions
from shared.store.base import NewJob, StoreError
from shared.store.dependencies import Parent, Waiting, check_parents, parents_of, resolution
from shared.store.sqlite import batches, writes
from shared.store.sqlite.codecs import chunks, from_ms, marks, stored_id, to_job
from shared.store.sqlite.schema import WAITING_SQL
from shared.store.sqlite.writes import insert_unique, update_job
from shared.store.transitions import KIND_TEMPLATE, Fields, attempt_record_id

_WAITING = Status.WAITING.value
_ENDED = tuple(s.value for s in TERMINAL)
# Whether any job waits for a parent (a microsecond: an index's first entry, a table's first row): most ends have
# no dependents, and most files no waiting job at all, so this spares each end's transaction the lookups of its jobs.
_NONE_WAITS = f"""SELECT NOT EXISTS (
        SELECT 1 FROM jobs INDEXED BY waiting_on WHERE {WAITING_SQL} AND waitingOn IS NOT NULL
    ) AND NOT EXISTS (SELECT 1 FROM job_dependencies)"""


class _Parents(NamedTuple):
    """What a create reads of the jobs its requests name in dependsOn, by id."""

    found: dict[str, Parent]
    open: set[str]  # those that have not ended


def _parents(conn: sqlite3.Connection, news: Sequence[NewJob]) -> _Parents:
    wanted = _stored_ids(p for new in news for p in new.dependsOn or ())
    parents = _Parents({}, set())
    for chunk in chunks(wanted):
        rows = conn.execute(f"SELECT id, tenantId, kind, status FROM jobs WHERE id IN ({marks(chunk)})", chunk)
        for row in rows:
            parents.found[str(row[0])] = Parent(str(row[0]), str(row[1]), row[2] == KIND_TEMPLATE)
            if row[3] not in _ENDED:
                parents.open.add(str(row[0]))
    return parents


def waiting_on(open_parents: Sequence[str]) -> Fields:
    """The row's own `waitingOn` of a job waiting for these parents that have not ended: set when it is one."""
    return {"waitingOn": open_parents[0]} if len(open_parents) == 1 else {}


def link(conn: sqlite3.Connection, waits: Iterable[tuple[str, Sequence[str]]]) -> None:
    """The rows of `job_dependencies` of these (waiting job, parents that have not ended): one per parent of a job
    that waits for several."""
    rows = [(parent, job_id) for job_id, parents in waits if len(parents) > 1 for parent in parents]
    conn.executemany("INSERT INTO job_dependencies (parentId, childId) VALUES (?, ?) ON CONFLICT DO NOTHING", rows)


def link_again(conn: sqlite3.Connection, parent_id: str) -> None:
    """A job re-driven from the DLQ: the jobs that still wait for it (under `run`, its failure left them waiting
    for their other parents) get a row for it, so that its next end settles them. Only a job of several parents
    can still wait for a parent that failed; one created after the failure with one parent open waits on that
    one in its own row, and has this row besides. Reads the waiting jobs only (due_order), a re-drive's rare
    cost."""
    conn.execute(
        """INSERT OR IGNORE INTO job_dependencies (parentId, childId)
           SELECT ?, jobs.id FROM jobs, json_each(jobs.dependsOn) AS parent
           WHERE jobs.status = ? AND parent.value = ?""",
        (parent_id, _WAITING, parent_id),
    )


def settle_dependents(conn: sqlite3.Connection, parent_ids: Sequence[str]) -> set[str]:
    """The waiting dependents of these jobs, which end in the caller's transaction, settled; a dependent the
    settling cancels ends too, and its own dependents are settled next, down the graph. Which of `parent_ids`
    had dependents."""
    if conn.execute(_NONE_WAITS).fetchone()[0]:
        return set()
    had: set[str] | None = None
    ended = list(parent_ids)
    while ended:
        rows: list[sqlite3.Row] = []
        for chunk in chunks(ended):
            rows += conn.execute(
                f"""SELECT waitingOn, id FROM jobs INDEXED BY waiting_on
                    WHERE {WAITING_SQL} AND waitingOn IN ({marks(chunk)})""",
                chunk,
            ).fetchall()
            rows += conn.execute(
                f"DELETE FROM job_dependencies WHERE parentId IN ({marks(chunk)}) RETURNING parentId, childId", chunk
            ).fetchall()
        if had is None:
            had = {str(r[0]) for r in rows}
        settled = _settle(conn, list(dict.fromkeys(str(r[1]) for r in rows)))
        batches.ended(conn, settled.ended.values())  # a cancelled dependent may be its batch's last member
        ended = list(settled.ended)
    return had or set()


class _Settled(NamedTuple):
    released: dict[str, Fields]  # the jobs made pending, with the fields written (no row read back: a fan-out's
    # root releases thousands in its end's transaction)
    ended: dict[str, Job]  # the jobs cancelled, as they are now (their own dependents and batch come next)


def _settle(conn: sqlite3.Connection, job_ids: list[str]) -> _Settled:
    """Each of these jobs that still waits, settled against its parents' statuses."""
    waits: list[Waiting] = []
    for chunk in chunks(job_ids):
        rows = conn.execute(
            f"""SELECT id, dependsOn, onParentFailure, scheduledAt, attempts FROM jobs
                WHERE id IN ({marks(chunk)}) AND status = ?""",
            [*chunk, _WAITING],
        )
        waits += [Waiting(str(r[0]), _ids(r[1]), r[2], from_ms(r[3]), int(r[4])) for r in rows]
    statuses: dict[str, Status] = {}
    for chunk in chunks(parents_of(waits)):
        for row in conn.execute(f"SELECT id, status FROM jobs WHERE id IN ({marks(chunk)})", chunk):
            statuses[str(row[0])] = Status(row[1])
    done = _Settled({}, {})
    now = utc_now()
    for wait in waits:
        settled = resolution(wait, statuses, now)
        if settled is None:
            continue
        if settled.cancelled_attempt is None:
            done.released[wait.id] = settled.fields
            continue
        attempt = int(settled.cancelled_attempt["attempt"])
        record = {"id": attempt_record_id(wait.id, attempt), "jobId": wait.id, **settled.cancelled_attempt}
        insert_unique(conn, "executions", record)
        row = update_job(conn, wait.id, settled.fields, "status = ?", (_WAITING,))
        if row is not None:
            done.ended[wait.id] = to_job(row)
    writes.update_jobs(conn, done.released, "jobs.status = ?", [_WAITING])
    return done


def _ids(text: str | None) -> list[str]:
    """A dependsOn column's parent ids, as rows keep ids."""
    return _stored_ids(str(p) for p in json.loads(text or "[]"))


def _stored_ids(parent_ids: Iterable[str]) -> list[str]:
    """These ids as rows keep them, each once (as a job keeps its parents: transitions.new_job)."""
    return list(dict.fromkeys(i for p in parent_ids if (i := stored_id(p))))


def created(conn: sqlite3.Connection, news: Sequence[NewJob]) -> list[Job | StoreError]:
    """writes.created, the parents of waiting jobs checked before the insert (a refused one is its own answer,
    decided before anything is written), each waiting job written where its open parents' ends find it, and one
    with a parent that has ended settled at once."""
    if not any(new.dependsOn for new in news):
        return writes.created(conn, news)
    parents = _parents(conn, news)
    refused: dict[int, StoreError] = {}
    for index, new in enumerate(news):
        try:
            check_parents(new, parents.found)
        except StoreError as exc:
            refused[index] = exc
    kept = [new for i, new in enumerate(news) if i not in refused]
    open_parents = [[p for p in _stored_ids(new.dependsOn or ()) if p in parents.open] for new in kept]
    written = writes.created(conn, kept, [waiting_on(ids) for ids in open_parents]) if kept else []
    waits = [
        (job, ids)
        for job, ids in zip(written, open_parents, strict=True)
        if isinstance(job, Job) and job.status is Status.WAITING
    ]
    link(conn, [(job.id, ids) for job, ids in waits])
    # A parent that has ended already may settle the wait now: the last one released it, a failed one cancels it.
    ready = [job.id for job, ids in waits if len(ids) < len(job.dependsOn or ())]
    settled = _settle(conn, ready) if ready else _Settled({}, {})
    inserted = iter([_as_settled(job, settled) for job in written])
    return [refused[i] if i in refused else next(inserted) for i in range(len(news))]


def _as_settled(job: Job | StoreError, settled: _Settled) -> Job | StoreError:
    if isinstance(job, StoreError):
        return job
    if job.id in settled.released:
        return transitions.applied(job, settled.released[job.id])
    return settled.ended.get(job.id, job)


def closed(conn: sqlite3.Connection, closings: Sequence[writes.Closing]) -> Closed:
    """writes.close_attempts, and the dependents of the jobs they ended settled, and their batches fired when
    they were the last to end, in the same transaction."""
    written = writes.close_attempts(conn, closings)
    ending = [c for c in written if c is not None and c.fields.get("status") in _ENDED]
    if not ending:
        return Closed(written, set())
    nudging = settle_dependents(conn, [c.job.id for c in ending])
    if any(c.job.batchId for c in ending):
        fired = set(batches.ended(conn, [writes.closed(c) for c in ending]))
        nudging |= {c.job.id for c in ending if c.job.batchId in fired}
    return Closed(written, nudging)


class Closed(NamedTuple):
    """What `closed` wrote: the closings (writes.close_attempts), and which of their jobs had dependents (or fired
    their batch): their closer nudges the scheduler, as a job they released may be due now."""

    written: list[writes.Closing | None]
    had_dependents: set[str]

    def jobs(self) -> list[Job | None]:
        """The jobs as closed (writes.closed), made after the transaction; those that had dependents with
        hasDependents set, so that their closer may nudge the scheduler (a dependent may be due now)."""
        jobs = [writes.closed(w) for w in self.written]
        if not self.had_dependents:
            return jobs
        return [j.evolve(hasDependents=True) if j is not None and j.id in self.had_dependents else j for j in jobs]
