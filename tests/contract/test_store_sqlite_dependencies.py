"""What a waiting job costs the SQLite file (issue 50: at most one write more than an independent job's), counted
row by row by temporary triggers on the store's one write connection: the rows of `jobs` and `job_dependencies`
each job's creation and release wrote."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from shared.model import Job, Outcome, Status
from shared.store.sqlite import SqliteJobStore
from tests.contract.store_kit import claim_one, new, reload, result, start
from tests.contract.test_store_workflows import diamond, run_step

# The row writes counted, each for the job it is about: (event, table, that job's id).
COUNTED = [
    ("INSERT", "jobs", "new.id"),
    ("UPDATE", "jobs", "new.id"),
    ("INSERT", "job_dependencies", "new.childId"),
    ("DELETE", "job_dependencies", "old.childId"),
]


def counting(tmp_path: Path) -> SqliteJobStore:
    store = SqliteJobStore(tmp_path / "jobs.db")
    store.ensure_schema()
    with store.database.write() as conn:
        conn.execute("CREATE TEMP TABLE row_writes (jobId TEXT NOT NULL)")
        for n, (event, table, job_id) in enumerate(COUNTED):
            conn.execute(
                f"""CREATE TEMP TRIGGER counted_{n} AFTER {event} ON main.{table}
                    BEGIN INSERT INTO row_writes VALUES ({job_id}); END"""
            )
    return store


def row_writes(store: SqliteJobStore) -> Counter[str]:
    with store.database.write() as conn:  # the temporary table is the write connection's
        return Counter(
            {str(r[0]): int(r[1]) for r in conn.execute("SELECT jobId, count(*) FROM row_writes GROUP BY 1")}
        )


def end(store: SqliteJobStore, job_id: str) -> None:
    store.finish_attempt(start(store, claim_one(store, reload(store, job_id))), result(Outcome.SUCCEEDED))


def test_a_job_waiting_for_one_parent_writes_its_row_twice_and_nothing_else(tmp_path: Path) -> None:
    store = counting(tmp_path)
    try:
        root = store.create(new(jobType="root"))
        link = store.create(new(dependsOn=[root.id]))
        members = [j for j in store.create_many([new(dependsOn=[root.id]) for _ in range(3)]) if isinstance(j, Job)]
        assert len(members) == 3
        independent = store.create(new())
        before_the_end = row_writes(store)
        end(store, root.id)
        assert {reload(store, job.id).status for job in (link, *members)} == {Status.PENDING}
        writes = row_writes(store)
        assert before_the_end[independent.id] == writes[independent.id] == 1  # its insert
        assert {before_the_end[job.id] for job in (link, *members)} == {1}  # its insert: waiting, nothing more
        assert {writes[job.id] for job in (link, *members)} == {2}  # and its release
    finally:
        store.close()


def test_a_workflows_steps_of_one_parent_write_their_rows_twice_a_fan_in_a_row_per_parent(tmp_path: Path) -> None:
    store = counting(tmp_path)
    try:
        ids = {step.name: step.jobId for step in store.create_workflow(diamond()).workflow.steps}
        for name in ("extract", "left", "right", "load"):
            run_step(store, ids[name])
        writes = row_writes(store)
        # Besides its insert and its attempt (claim, start, finish): a step of one parent its release; the fan-in
        # its release and a row per parent, written with it and deleted by that parent's end.
        beyond_an_independent_job = {name: writes[job_id] - 1 - 3 for name, job_id in ids.items()}
        assert beyond_an_independent_job == {"extract": 0, "left": 1, "right": 1, "load": 1 + 2 * 2}
    finally:
        store.close()
