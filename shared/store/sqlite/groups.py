"""What workflows and batches share in the SQLite file: their records listed newest first per tenant, and their
jobs counted by status."""

from __future__ import annotations

import sqlite3
from collections import Counter
from typing import Literal

from shared.store.sqlite.codecs import chunks, marks

Group = Literal["workflows", "batches"]
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
