"""Workflows in the SQLite file (shared/workflows.py): a workflow's record and all its steps' jobs are written in
one transaction, so it is stored whole or not at all, and its roots are pending at once. A step's job is a
waiting job like any other (dependencies.py), its parents steps of the workflow, none of them ended."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

from bson import ObjectId

from shared.model import utc_now
from shared.store.base import DuplicateWorkflow, NewWorkflow
from shared.store.sqlite import dependencies, groups
from shared.store.sqlite.codecs import from_ms, stored_id, to_ms
from shared.store.sqlite.database import SqliteDatabase
from shared.store.sqlite.writes import insert_unique
from shared.store.workflow_plans import planned
from shared.workflows import Workflow, WorkflowState, WorkflowView, steps_document, steps_of

_COLUMNS = "id, tenantId, idempotencyKey, name, createdAt, state, steps"


def create(database: SqliteDatabase, new: NewWorkflow) -> WorkflowView:
    plan = planned(new, str(ObjectId()), utc_now(), held=False)
    workflow = plan.workflow
    with database.write() as conn:
        holder = conn.execute(
            "SELECT id FROM workflows WHERE tenantId = ? AND idempotencyKey = ?", (new.tenantId, new.idempotencyKey)
        ).fetchone()
        if holder is not None:
            raise DuplicateWorkflow(new.idempotencyKey, str(holder[0]))
        conn.execute(
            f"INSERT INTO workflows ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                workflow.id,
                workflow.tenantId,
                workflow.idempotencyKey,
                workflow.name,
                to_ms(workflow.createdAt),
                workflow.state.value,
                json.dumps(steps_document(workflow.steps), separators=(",", ":")),
            ),
        )
        for job in plan.jobs:  # keys of the workflow's own (its fresh id): never taken
            insert_unique(conn, "jobs", {**job, **dependencies.waiting_on(job.get("dependsOn", ()))}, returning="id")
        dependencies.link(conn, [(job["id"], job.get("dependsOn", ())) for job in plan.jobs])  # steps: none ended
    statuses = {job["id"]: str(job["status"]) for job in plan.jobs}
    return WorkflowView(workflow, Counter(statuses.values()), statuses)


def read(database: SqliteDatabase, workflow_id: str) -> WorkflowView | None:
    if (stored := stored_id(workflow_id)) is None:
        return None
    with database.read() as conn:
        row = conn.execute(f"SELECT {_COLUMNS} FROM workflows WHERE id = ?", (stored,)).fetchone()
        if row is None:
            return None
        statuses = {
            str(r[0]): str(r[1]) for r in conn.execute("SELECT id, status FROM jobs WHERE workflowId = ?", (stored,))
        }
    return WorkflowView(_workflow(row), Counter(statuses.values()), statuses)


def by_key(database: SqliteDatabase, tenant_id: str, idempotency_key: str) -> WorkflowView | None:
    with database.read() as conn:
        holder = conn.execute(
            "SELECT id FROM workflows WHERE tenantId = ? AND idempotencyKey = ?", (tenant_id, idempotency_key)
        ).fetchone()
    return read(database, str(holder[0])) if holder is not None else None


def listing(database: SqliteDatabase, tenant_id: str, limit: int, before: str | None) -> list[WorkflowView]:
    with database.read() as conn:
        rows = groups.newest(conn, "workflows", _COLUMNS, tenant_id, limit, before)
        counts = groups.counts(conn, "workflows", [str(r[0]) for r in rows])
    return [WorkflowView(_workflow(row), counts[str(row[0])]) for row in rows]


def _workflow(row: sqlite3.Row) -> Workflow:
    return Workflow(
        id=str(row[0]),
        tenantId=str(row[1]),
        idempotencyKey=str(row[2]),
        name=row[3],
        createdAt=from_ms(int(row[4])),
        state=WorkflowState(row[5]),
        steps=steps_of(json.loads(row[6])),
    )
