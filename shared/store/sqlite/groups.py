"""What workflows and batches share in the SQLite file: their records listed newest first per tenant, their jobs
counted by status, and retention of the records whose jobs retention deleted."""

from __future__ import annotations

import sqlite3
from collections import Counter

from shared.store.emptied_records import Group
from shared.store.sqlite.codecs import chunks, marks

_JOB_COLUMN = {"workflows": "workflowId", "batches": "batchId"}


def newest(
    conn: sqlite3.Connection, table: Group, columns: str, tenant_id: str, limit: int, before: str | None
) -> list[sqlite3.Row]:
    """The tenant's records newest first (by id: an ObjectId starts with its creation time), after `before`."""
    after_page = "" if before is None else "AND id < ?"
    return conn.execute(
        f"SELECT {columns} FROM {table} WHERE tenantId = ? {after_page} ORDER BY id DESC LIMIT ?",
        (tenant_id, *([] if before is None else [before.lower()]), limit),
    ).fetchall()


def counts(conn: sqlite3.Connection, table: Group, ids: list[str]) -> dict[str, Counter[str]]:
    """Each record's jobs (a workflow's steps, a batch's members) counted by status, by the record's id."""
    column = _JOB_COLUMN[table]
    found: dict[str, Counter[str]] = {record_id: Counter() for record_id in ids}
    for chunk in chunks(ids):
        for record_id, status, n in conn.execute(
            f"SELECT {column}, status, count(*) FROM jobs WHERE {column} IN ({marks(chunk)}) GROUP BY {column}, status",
            chunk,
        ):
            found[str(record_id)][str(status)] = int(n)
    return found


def delete_emptied(
    conn: sqlite3.Connection, table: Group, created_before: str, limit: int, after: str | None
) -> tuple[int, str | None]:
    """Retention of records: of up to `limit` records created before the id `created_before` (an ObjectId starts
    with its creation time), oldest first after the record `after`, delete those no job of which is left (retention
    deleted them): a workflow (written whole, in one transaction), a batch once fired and its callbacks deleted too.
    How many were deleted, and where the next call starts (None: from the oldest again)."""
    column = _JOB_COLUMN[table]
    fired = "AND firedAt IS NOT NULL" if table == "batches" else ""
    ids = [
        str(row[0])
        for row in conn.execute(
            f"SELECT id FROM {table} WHERE id > ? AND id < ? {fired} ORDER BY id LIMIT ?",
            (after or "", created_before, limit),
        )
    ]
    # A batch's callbacks carry callbackOf, not batchId: they are looked for by the ids its record keeps.
    callbacks = (
        f"AND NOT EXISTS (SELECT 1 FROM jobs WHERE id IN ({table}.onComplete, {table}.onSuccess))"
        if table == "batches"
        else ""
    )
    deleted = 0
    for chunk in chunks(ids):
        deleted += conn.execute(
            f"""DELETE FROM {table} WHERE id IN ({marks(chunk)})
                AND NOT EXISTS (SELECT 1 FROM jobs WHERE {column} = {table}.id) {callbacks}""",
            chunk,
        ).rowcount
    return deleted, (ids[-1] if len(ids) == limit else None)
