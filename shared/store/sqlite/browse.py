"""JobBrowser on the SQLite file, through the database's own connection pool.

The indexes these queries walk are created with the store's schema (schema.py). The counts by type and status,
and the tenants, are read from job_counts, which triggers keep with every write. Jobs that have ended, the bulk
of a store that has run for a while, are in partial indexes: final_listing for pages of one final status. A
tenant's pending jobs are listed through pending_listing (theirs alone); the few jobs between pending and their
end (queued to running) are listed and counted through due_order, which starts with the status.
tenant_type_listing serves pages of one type, tenant_templates and template_runs templates and their runs,
dead_letters and tenant_dead_letters (partial) the DLQ of every tenant and of one; the last hour's endings and
the history are counted by minute as they happen (recent.py, minutes.py). Where SQLite's planner, which has no
statistics here, would pick a shorter index and read every row behind it, INDEXED BY names the right one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from shared.model import TERMINAL, Job, Status
from shared.store.browse import Counts, ErrorGroup, JobQuery, counts_from, error_groups
from shared.store.history import History, unix_minute
from shared.store.sqlite import minutes, recent
from shared.store.sqlite.codecs import to_jobs, to_ms
from shared.store.sqlite.database import SqliteDatabase
from shared.store.sqlite.schema import DEAD_SQL, FAILED_SQL, FINAL_SQL, RECENTLY_ENDED_SQL, RESTING, TEMPLATES_SQL

# The statuses a job passes through in moments (not in job_counts): few jobs are ever in them.
PASSING_SQL = f"status IN ({', '.join(repr(s.value) for s in Status if s not in RESTING)})"


class SqliteBrowser:
    def __init__(self, database: SqliteDatabase) -> None:
        self._database = database

    def page(self, tenant_id: str, query: JobQuery) -> list[Job]:
        where: list[str] = ["tenantId = ?"]
        params: list[Any] = [tenant_id]
        index = ""
        if query.status is not None:
            # A literal (an enum value, never client text): a status's partial index applies only then.
            where.append(f"status = '{query.status.value}'")
            if query.status is Status.PENDING and query.templateId is None:
                index = "INDEXED BY pending_listing"  # a tenant's pending jobs alone, in page order
            elif query.jobType is None and query.templateId is None:
                # Ended jobs are many: walk their index in page order (the condition repeated as the partial index
                # states it, which is how SQLite sees that it applies). Jobs between pending and their end are what
                # runs now: find them by status and sort those few (a tenant-wide walk would read every row).
                if query.status in TERMINAL:
                    where.append(FINAL_SQL)
                    index = "INDEXED BY final_listing"
                else:
                    index = "INDEXED BY due_order"
        if query.jobType is not None:
            where.append("jobType = ?")
            params.append(query.jobType)
        if query.templateId is not None:
            where.append("templateId = ?")
            params.append(query.templateId)
        if query.templates is not None:
            # A literal, not a parameter: only then does SQLite see that the templates' partial index applies.
            where.append(TEMPLATES_SQL if query.templates else f"NOT {TEMPLATES_SQL}")
        order = "DESC"
        if query.before is not None:
            where.append("(createdAt, id) < (?, ?)")
            params += [to_ms(query.before.createdAt), query.before.id]
        elif query.after is not None:
            # The page just newer than the cursor: walk up from it, then list it newest first like every page.
            where.append("(createdAt, id) > (?, ?)")
            params += [to_ms(query.after.createdAt), query.after.id]
            order = "ASC"
        sql = (
            f"SELECT * FROM jobs {index} WHERE {' AND '.join(where)} "
            f"ORDER BY createdAt {order}, id {order} LIMIT {max(query.limit, 0):d}"
        )
        with self._database.read() as conn:
            jobs = to_jobs(conn.execute(sql, params).fetchall())
        return jobs if order == "DESC" else jobs[::-1]

    def counts(self, tenant_id: str | None, since: datetime) -> Counts:
        tenant_sql, tenant_params = _tenant_filter(tenant_id)
        with self._database.read() as conn:
            by_status = conn.execute(
                f"SELECT jobType, status, sum(n) FROM job_counts WHERE n > 0 {tenant_sql} GROUP BY jobType, status",
                tenant_params,
            ).fetchall()
            templates = conn.execute(
                f"SELECT jobType, status, sum(n) FROM job_counts WHERE template = 1 AND n > 0 {tenant_sql} "
                "GROUP BY jobType, status",
                tenant_params,
            ).fetchall()
            by_status += conn.execute(
                f"SELECT jobType, status, count(*) FROM jobs INDEXED BY due_order WHERE {PASSING_SQL} {tenant_sql} "
                "GROUP BY jobType, status",
                tenant_params,
            ).fetchall()
            ended, failed = recent.last_hour(conn, tenant_id, since, RECENTLY_ENDED_SQL, FAILED_SQL)
            (paused,) = conn.execute(
                f"SELECT count(*) FROM jobs WHERE {TEMPLATES_SQL} AND status = ? AND paused = 1 {tenant_sql}",
                [Status.PENDING.value, *tenant_params],
            ).fetchone()
        return counts_from(by_status, templates, ended, failed, paused)

    def tenants(self, tenant_id: str | None, limit: int) -> list[str]:
        tenant_sql, tenant_params = _tenant_filter(tenant_id)
        with self._database.read() as conn:
            rows = conn.execute(
                f"SELECT DISTINCT tenantId FROM job_counts WHERE n > 0 {tenant_sql} ORDER BY tenantId LIMIT ?",
                [*tenant_params, max(limit, 0)],
            )
            return [str(r[0]) for r in rows]

    def dlq_groups(self, tenant_id: str | None, limit: int) -> list[ErrorGroup]:
        tenant_sql, tenant_params = _tenant_filter(tenant_id)
        index = "dead_letters" if tenant_id is None else "tenant_dead_letters"
        with self._database.read() as conn:
            rows = conn.execute(
                f"SELECT lastError, jobType, count(*) FROM jobs INDEXED BY {index} WHERE {DEAD_SQL} {tenant_sql} "
                "GROUP BY lastError, jobType",
                tenant_params,
            ).fetchall()
        return error_groups(rows, limit)

    def dead_letters(self, tenant_id: str | None, error: str, limit: int) -> list[Job]:
        tenant_sql, tenant_params = _tenant_filter(tenant_id)
        with self._database.read() as conn:
            rows = conn.execute(
                f"""SELECT * FROM jobs WHERE {DEAD_SQL} AND lastError = ? {tenant_sql}
                    ORDER BY updatedAt DESC LIMIT ?""",
                [error, *tenant_params, max(limit, 0)],
            ).fetchall()
        return to_jobs(rows)

    def history(self, tenant_id: str | None, job_type: str | None, since: datetime, until: datetime) -> History:
        with self._database.read() as conn:
            return minutes.history(conn, tenant_id, job_type, unix_minute(since), unix_minute(until))


def _tenant_filter(tenant_id: str | None) -> tuple[str, list[Any]]:
    return ("AND tenantId = ?", [tenant_id]) if tenant_id is not None else ("", [])
