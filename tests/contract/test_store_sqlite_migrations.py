"""The SQLite file's numbered migrations (shared/store/sqlite/migrations.py, schema.py): a file written by the last
version before them is brought to the latest and keeps working, processes starting together on one file all end
there, a file of a later version is refused and left as it is, the migrations make what the queries expect, and
a released migration is never edited."""

from __future__ import annotations

import logging
import multiprocessing
import re
import shutil
import sqlite3
from collections import Counter
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from jobsched.backoff import Backoff
from jobsched.limits import Limits
from shared.model import Outcome, Status, utc_now
from shared.sealing import Keyring
from shared.store.base import SchemaTooNew
from shared.store.browse import JobQuery, RecentCounts
from shared.store.history import EVENT_COUNTERS, GAUGES, LATENESS_COUNTERS, MINUTE_MS, minute_start, unix_minute
from shared.store.sqlite import SqliteJobStore, schema
from shared.store.sqlite.keys import SqliteKeyStore
from shared.store.sqlite.migrations import (
    LATEST,
    MIGRATIONS,
    add_missing_columns,
    backoff_on_jobs,
    history_by_minute,
    job_dependencies,
    trace_context,
    waiting_on_one_parent,
)
from shared.store.sqlite.schema import EXECUTION_COLUMNS, JOB_COLUMNS, PARTIAL_INDEXES, RESTING
from tests.contract.store_kit import (
    NOT_FINAL_ONES,
    claim_one,
    new,
    one_in_every_status,
    reload,
    result,
    running,
    start,
)
from tests.fixtures.databases.write_fixtures import FIXTURE_KEY, T0
from tests.migration_support import announce_backoffs, assert_released_unchanged, digests
from tests.support import REPO_ROOT, backend_beside

FIXTURE = Path(__file__).parents[1] / "fixtures" / "databases" / "sqlite-before-migrations.db"
REPLICAS = 4
SLOW = Backoff(base_s=30, cap_s=600)  # a type's own backoff, announced before the upgrade
# Each released migration's name and the sha256 of its source (inspect.getsource), in MIGRATIONS' order.
RELEASED = [
    ("jobs_table", "68915f13bc8672974dac3e0fe7c16e88ef3edabfcc75dc9daf0ee5302c3a7b04"),
    ("indexes_attempts_and_rates", "6e8d3a723056aca66a1bbd9f61dd234319e89bcc60c4e6ad6ef06aedfdd5130d"),
    ("attempt_columns", "3bc64ba3970064bfd4fe01f3c9bab59cec4deef13c369a781f9b4719699c4fec"),
    ("job_counts", "6d506822365d48fb4b0b66774890b06ca42464d88a1f5d88bc591a6e28171bb4"),
    ("recent_endings_by_minute", "f115f6d47a3dbb4b67868cc770ccf54f8e1cff58adac57d51d1a645e74c7255a"),
    ("drop_final_counts", "1ce43721c189986eaf271559bd03b8564c53582ac1afb6d53c115d555a87abfe"),
    ("job_type_tables", "942eb01d18382d61a6c483a45a3747823dafd1723cfb17c079b943953ba64d9a"),
    ("signing_secrets_table", "7df1ec9d7f5d379fc4d7635a50ae225f668ee2fd3cb2adc1a299c9cfc02a1c9f"),
    ("credentials_table", "5bb0de1b5f260b40e4bdca889d5205016172b2a97c115529078c6a603f947ee7"),
    ("api_keys_table", "d952d0845f421960dbcdb4996540a1cb1c9941f3ef0f0e6ca3a9d8b2f71cbcce"),
    ("backoff_on_jobs", "217cdbfef2c79a75420c26109a9b493870919f8c908b534837403405d77598a3"),
    ("job_dependencies", "bcfc01cc697ea8f141adba2c248788a5d5a9dc9a8a213eaf0e06b756ed893ac1"),
    ("workflows_table", "2b87185309ede2abadeb2875defae2dd1fd5b2835c403530e05bb70779191093"),
    ("batches_table", "3e5cf276441672b0e36fd85e667784f3771bce0e2674dea9905b0bf1be7547b8"),
    ("waiting_on_one_parent", "a796a1f879d0cd6c28a39db35f4684ea070c04a1e78a65214679fdd0fab3cc8f"),
    ("trace_context", "615819ff6fb9ace4f699130b73f1a3341d269e8aa6f44b5f660630a0df32b31f"),
    ("history_by_minute", "2ff50d1f9366a48305f77e635b1c4b9e441a0dbd470a4f1eb54adfa024a1c3a4"),
    ("endings_into_history", "6aa6c5d0cb5e14e1cc4b5bc0853139e4c02c1f3fa2f03d1051ea4a3682ef5345"),
]
# What released migrations call, frozen with them.
RELEASED_HELPERS = [("add_missing_columns", "35b02a0d6f7ee0463b7f21919a5a59b0693c1a3f52f5739421a5c6ae06981a25")]
RECOUNT = """SELECT tenantId, jobType, status, kind = 'template', count(*) FROM jobs
    WHERE status IN ('pending', 'buffered', 'completed', 'dlq', 'cancelled') GROUP BY 1, 2, 3, 4"""
KEPT = "SELECT tenantId, jobType, status, template, n FROM job_counts WHERE n != 0"

Schema = list[tuple[str, str, str, str | None]]
T = TypeVar("T")


def read(path: Path, sql: str) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(sql).fetchall()


def version(path: Path) -> int:
    return int(read(path, "PRAGMA user_version")[0][0])


def schema_of(path: Path) -> Schema:
    """Every table, index and trigger of the file: type, name, table and SQL."""
    return sorted(read(path, "SELECT type, name, tbl_name, sql FROM sqlite_master"))


def columns_of(path: Path) -> dict[str, list[str]]:
    """Every table's columns, in their order."""
    tables = [name for (name,) in read(path, "SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {table: [str(row[1]) for row in read(path, f"PRAGMA table_info({table})")] for table in tables}


def rows_of(path: Path, columns: dict[str, list[str]] | None = None) -> dict[str, set[tuple[Any, ...]]]:
    """Every row of every table (of `columns`: those tables, those of their columns; a file read before migrations
    added some)."""
    tables = columns if columns is not None else columns_of(path)
    return {table: set(read(path, f"SELECT {', '.join(names)} FROM {table}")) for table, names in tables.items()}


def unmoved(tables: dict[str, T]) -> dict[str, T]:
    """Every table but the one migration 18 (endings_into_history) moved into history_by_minute (its last hour:
    none in the fixture)."""
    return {table: value for table, value in tables.items() if table != "recent_endings_by_minute"}


def added_column_is_empty(path: Path) -> bool:
    """The column migration 11 added holds nothing: the fixture's one type has the default backoff."""
    return read(path, "SELECT count(*) FROM jobs WHERE backoff IS NOT NULL") == [(0,)]


def fixture_copy(tmp_path: Path) -> Path:
    """The file as the version before numbered migrations left it, copied: the fixture itself is never opened."""
    copy = tmp_path / "before-migrations.db"
    shutil.copyfile(FIXTURE, copy)
    return copy


def migrated_empty_file(tmp_path: Path) -> Path:
    path = tmp_path / "fresh.db"
    store = SqliteJobStore(path)
    try:
        store.ensure_schema()
    finally:
        store.close()
    return path


def test_a_file_from_before_numbered_migrations_is_migrated_and_keeps_working(tmp_path: Path) -> None:
    old = fixture_copy(tmp_path)
    written, written_columns = rows_of(old), columns_of(old)
    assert version(old) == 0
    store = SqliteJobStore(old)
    try:
        store.ensure_schema()
        assert version(old) == LATEST
        assert schema_of(old) == schema_of(migrated_empty_file(tmp_path))
        assert rows_of(old, unmoved(written_columns)) == unmoved(written)
        assert added_column_is_empty(old)
        statuses = Counter(status for (status,) in read(old, "SELECT status FROM jobs"))
        assert statuses == {"pending": 3, "buffered": 1, "completed": 1, "dlq": 1, "cancelled": 1, "running": 1}
        assert len(read(old, "SELECT * FROM executions")) == 4
        assert set(read(old, KEPT)) == set(read(old, RECOUNT))

        backend = backend_beside(store, Keyring(FIXTURE_KEY))
        key = SqliteKeyStore(old).find("jsk_fixture")
        assert key is not None
        assert key.tenantId == "acme"
        assert backend.credentials.value("acme", "smtp") == "hunter2"
        assert len(backend.signing_secrets.live("acme")) == 1
        assert backend.job_types.limit_overrides() == {"email": Limits(concurrency=4)}
        assert [a.executor for a in backend.job_types.announcements("email")] == ["executor-email-1"]

        template = store.job_by_key("acme", "nightly")
        assert template is not None
        [claimed] = store.claim_due_jobs(T0 + timedelta(hours=1), 10, ["report"])
        assert (claimed.templateId, claimed.status) == (template.id, Status.QUEUED)
        finished = store.finish_attempt(start(store, claimed), result(Outcome.SUCCEEDED))
        assert finished is not None
        assert finished.status is Status.COMPLETED
        listed = {job.id for job in backend.browser.page("acme", JobQuery())}
        assert listed == {str(id_) for (id_,) in read(old, "SELECT id FROM jobs WHERE tenantId = 'acme'")}
        assert finished.id in {job.id for job in backend.browser.page("acme", JobQuery(status=Status.COMPLETED))}
        assert set(read(old, KEPT)) == set(read(old, RECOUNT))

        # An attempt that version started has its record (`running`); this version lists it once, from its job,
        # and its outcome completes that record in place.
        [(running_id,)] = read(old, "SELECT id FROM jobs WHERE status = 'running'")
        attempts = [(e.attempt, e.worker, e.outcome) for e in store.list_executions(running_id)]
        assert attempts == [(1, "fixture-worker", Outcome.RUNNING)]
        running = store.get(running_id)
        assert running is not None
        assert store.finish_attempt(running, result(Outcome.SUCCEEDED)) is not None
        attempts = [(e.attempt, e.worker, e.outcome) for e in store.list_executions(running_id)]
        assert attempts == [(1, "fixture-worker", Outcome.SUCCEEDED)]
        assert read(old, f"SELECT count(*) FROM executions WHERE jobId = '{running_id}'") == [(1,)]
    finally:
        store.close()


def test_a_new_file_gets_every_migration_once_and_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "new.db"
    caplog.set_level(logging.INFO, "jobsched.store")
    store = SqliteJobStore(path)
    try:
        store.ensure_schema()
        store.ensure_schema()
        SqliteKeyStore(path).ensure_schema()
    finally:
        store.close()
    applied = [
        (getattr(r, "version", None), getattr(r, "migration", None))
        for r in caplog.records
        if getattr(r, "action", None) == "schema_migrated"
    ]
    assert applied == [(number, m.__name__) for number, m in enumerate(MIGRATIONS, start=1)]
    assert version(path) == LATEST


def test_the_migrations_are_applied_all_or_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "new.db"

    def breaks(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half_done (x)")
        raise sqlite3.OperationalError("the last migration fails (injected)")

    monkeypatch.setattr(schema, "MIGRATIONS", (*MIGRATIONS[:-1], breaks))
    store = SqliteJobStore(path)
    try:
        with pytest.raises(sqlite3.OperationalError, match="injected"):
            store.ensure_schema()
    finally:
        store.close()
    assert version(path) == 0
    assert schema_of(path) == []  # not the tables of the migrations before it either


_together: Any = None  # the replicas' barrier, in each replica process


def _replica_started(together: Any) -> None:
    global _together
    _together = together


def start_replica(path: str, keys: bool) -> int:
    """One process starting on the file: the job store's ensure_schema, or the key store's (`jobsched keys`); the
    version it leaves the file at."""
    _together.wait(timeout=60)
    if keys:
        SqliteKeyStore(path).ensure_schema()
    else:
        store = SqliteJobStore(path)
        try:
            store.ensure_schema()
        finally:
            store.close()
    return version(Path(path))


@pytest.mark.parametrize("start_from", ["empty", "before-migrations"])
def test_processes_starting_together_all_migrate_the_file_to_the_latest(tmp_path: Path, start_from: str) -> None:
    shared = tmp_path / "shared.db" if start_from == "empty" else fixture_copy(tmp_path)
    written = rows_of(shared) if start_from != "empty" else {}
    written_columns = columns_of(shared) if written else {}
    spawn = multiprocessing.get_context("spawn")
    together = spawn.Barrier(REPLICAS)
    with spawn.Pool(REPLICAS, initializer=_replica_started, initargs=(together,)) as pool:
        answers = pool.starmap(start_replica, [(str(shared), n == 0) for n in range(REPLICAS)])
    assert answers == [LATEST] * REPLICAS  # and none failed: a failure is raised here
    assert schema_of(shared) == schema_of(migrated_empty_file(tmp_path))
    if written:
        assert rows_of(shared, unmoved(written_columns)) == unmoved(written)
        assert added_column_is_empty(shared)


def test_a_file_of_a_later_version_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    path = migrated_empty_file(tmp_path)
    later = LATEST + 1
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(f"PRAGMA user_version = {later}")
        conn.execute("CREATE TABLE made_by_a_later_version (x)")
    before = path.read_bytes()
    expected = f"the database's schema is version {later}; this jobsched knows versions up to {LATEST}: "
    store = SqliteJobStore(path)
    try:
        with pytest.raises(SchemaTooNew) as refused:
            store.ensure_schema()
        assert str(refused.value).startswith(expected)
        assert "downgrades are not supported" in str(refused.value)
        with pytest.raises(SchemaTooNew):
            SqliteKeyStore(path).ensure_schema()  # `jobsched keys` and the API's key cache refuse it too
    finally:
        store.close()
    assert version(path) == later
    assert path.read_bytes() == before


def test_a_migrated_file_has_what_the_queries_expect(tmp_path: Path) -> None:
    """The queries keep their own copies of what the migrations wrote out (schema.py): they must agree."""
    path = migrated_empty_file(tmp_path)
    indexes = {name: sql for kind, name, _, sql in schema_of(path) if kind == "index" and sql is not None}
    partial = {name: sql.split(" WHERE ", 1)[1] for name, sql in indexes.items() if " WHERE " in sql}
    assert partial == PARTIAL_INDEXES
    sources = (REPO_ROOT / "shared" / "store" / "sqlite").glob("*.py")
    in_queries = r"(?:\"|FROM \w+ )INDEXED BY (\w+)"  # in a query's FROM, or the clause a query puts there
    named = {name for source in sources for name in re.findall(in_queries, source.read_text())}
    assert named
    assert named <= set(indexes), f"queries name indexes no migration makes: {named - set(indexes)}"
    assert {name for (_, name, *_) in read(path, "PRAGMA table_info(jobs)")} == JOB_COLUMNS
    assert {name for (_, name, *_) in read(path, "PRAGMA table_info(executions)")} == EXECUTION_COLUMNS
    triggers = {name: str(sql) for kind, name, _, sql in schema_of(path) if kind == "trigger"}
    counted = {"counted_insert": "new", "counted_delete": "old", "counted_leave": "old", "counted_enter": "new"}
    for trigger, row in counted.items():
        resting = " OR ".join(f"{row}.status = '{status.value}'" for status in RESTING)
        assert f"({resting})" in triggers[trigger], trigger  # browse.py counts the other statuses from the jobs
    ring = f"SELECT tenantId, jobType, at / {MINUTE_MS}, 1 FROM"
    assert [name for name, sql in triggers.items() if ring in sql] == sorted(
        ["history_completed", "history_dlq", "history_failed_attempt", "history_attempt_failed"]
    )
    history = {name for (_, name, *_) in read(path, "PRAGMA table_info(history_by_minute)")}
    assert {*EVENT_COUNTERS, *LATENESS_COUNTERS, *GAUGES} <= history  # what minutes.py reads and writes


def test_released_migrations_are_never_edited() -> None:
    assert_released_unchanged(MIGRATIONS, RELEASED, "shared/store/sqlite/migrations.py")
    helpers = digests([add_missing_columns])
    assert helpers == RELEASED_HELPERS, (
        "a helper of released migrations changed: they would no longer do what they did when released. Restore it, "
        "and give a new migration a helper of its own"
    )


@contextmanager
def upgraded(path: Path) -> Iterator[SqliteJobStore]:
    """A store on `path` once this jobsched's migrations have brought the file to the latest version, closed after."""
    store = SqliteJobStore(path)
    try:
        store.ensure_schema()
        assert version(path) == LATEST
        yield store
    finally:
        store.close()


def store_at_version(path: Path, at: int, monkeypatch: pytest.MonkeyPatch) -> SqliteJobStore:
    """A store on a file migrated up to version `at` only, as the jobsched whose last migration it was left it.
    This code's own writes still need the table of migration 12 and the column and index of migration 15 (an
    attempt's end reads a parent's waiting dependents there), so the file gets them too: the upgrade makes them
    again and changes nothing."""
    with monkeypatch.context() as patch:
        patch.setattr(schema, "MIGRATIONS", MIGRATIONS[:at])
        patch.setattr(schema, "LATEST", at)
        store = SqliteJobStore(path)
        store.ensure_schema()
    assert version(path) == at
    with store.database.write() as conn:
        for needed in (job_dependencies, waiting_on_one_parent, trace_context, history_by_minute):
            if at < MIGRATIONS.index(needed) + 1:
                needed(conn)
    return store


def test_an_upgrade_moves_the_jobs_waiting_for_one_parent_into_their_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 15 on a file of version 14, whose waiting jobs had a row in `job_dependencies` per parent that had
    not ended: a job waiting for its only parent names it in its row and its row of the table goes; a job of
    several parents keeps its rows. The parents' ends settle both kinds."""
    path = tmp_path / "v14.db"
    old = store_at_version(path, 14, monkeypatch)
    try:
        first, second = old.create(new(jobType="first")), old.create(new(jobType="second"))
        single = old.create(new(dependsOn=[first.id]))
        both = old.create(new(dependsOn=[first.id, second.id]))
        with old.database.write() as conn:  # what version 14 kept: the rows, no waitingOn
            job_dependencies(conn)
            conn.execute("UPDATE jobs SET waitingOn = NULL")
            rows = [(first.id, single.id), (first.id, both.id), (second.id, both.id)]
            conn.executemany("INSERT OR IGNORE INTO job_dependencies (parentId, childId) VALUES (?, ?)", rows)
    finally:
        old.close()
    with upgraded(path) as store:
        assert dict(read(path, "SELECT id, waitingOn FROM jobs WHERE status = 'waiting'")) == {
            single.id: first.id,
            both.id: None,
        }
        assert set(read(path, "SELECT parentId, childId FROM job_dependencies")) == set(rows[1:])
        for parent, still_waiting in ((first, {both.id}), (second, set())):
            store.finish_attempt(start(store, claim_one(store, parent)), result(Outcome.SUCCEEDED))
            statuses = {job.id: reload(store, job).status for job in (single, both)}
            assert {i for i, s in statuses.items() if s is Status.WAITING} == still_waiting
        assert {reload(store, job).status for job in (single, both)} == {Status.PENDING}


def test_an_upgrade_moves_the_last_hour_of_endings_into_the_days_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migrations 17 and 18 on a file of version 16: the old ring's minutes of the last hour become the history's
    (a stale minute of the old ring is left behind), the overview's last hour counts them, and the endings are
    counted in the history from then on."""
    path = tmp_path / "v16.db"
    old = store_at_version(path, 16, monkeypatch)
    now = utc_now()
    try:
        for _ in range(3):
            old.finish_attempt(running(old, tenantId="acme", jobType="mail"), result(Outcome.SUCCEEDED))
        old.finish_attempt(running(old, tenantId="acme", jobType="mail"), result(Outcome.FAILED, "boom"))
        stale = unix_minute(now) - 200
        with old.database.write() as conn:
            conn.execute(
                "INSERT INTO recent_endings_by_minute (tenantId, jobType, slot, minute, completed) "
                "VALUES (?, ?, ?, ?, ?)",
                ["acme", "mail", stale % 64, stale, 7],
            )
    finally:
        old.close()
    with upgraded(path) as store:
        assert "recent_endings_by_minute" not in columns_of(path)
        browser = backend_beside(store).browser
        # From the ring alone: none of the hour's endings is older than its first whole minute.
        since = minute_start(unix_minute(now) - 60)
        assert browser.counts(None, since).lastHour == {"mail": RecentCounts(completed=3, failed=1)}
        day = browser.history("acme", "mail", now - timedelta(hours=23), utc_now())
        assert (sum(m.completed for m in day.minutes), sum(m.failed for m in day.minutes)) == (3, 1)
        store.finish_attempt(running(store, tenantId="acme", jobType="mail"), result(Outcome.SUCCEEDED))
        day = browser.history("acme", "mail", now - timedelta(hours=23), utc_now())
        # The four starts made on version 16 counted too: store_at_version gave the file the table they need.
        assert (sum(m.completed for m in day.minutes), sum(m.started for m in day.minutes)) == (4, 5)


def test_an_upgrade_gives_the_jobs_not_final_of_a_type_its_announced_backoff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 11 on a file of version 10 (no backoff on jobs; closers looked up the type's): the jobs that may
    still run an attempt, of a type whose latest announcement has a backoff of its own, keep being retried with it."""
    path = tmp_path / "v10.db"
    old = store_at_version(path, 10, monkeypatch)
    try:
        assert "backoff" not in columns_of(path)["jobs"]
        types, t0 = backend_beside(old).job_types, utc_now()
        announce_backoffs(types, t0, SLOW)
        slow = one_in_every_status(old, "slow")
        claimed = running(old, jobType="slow")
        others = [*one_in_every_status(old, "back").values(), old.create(new(jobType="never-announced"))]
    finally:
        old.close()
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE jobs SET status = 'claimed' WHERE id = ?", (claimed.id,))  # as earlier versions wrote
    with upgraded(path) as store:
        backoffs = {name: reload(store, job).backoff for name, job in slow.items()}
        assert backoffs == {name: SLOW if name in NOT_FINAL_ONES else None for name in slow}
        assert reload(store, claimed).backoff == SLOW
        assert [reload(store, job).backoff for job in others] == [None] * len(others)
        assert {name: reload(store, job).evolve(backoff=None) for name, job in slow.items()} == slow  # nothing else
        migrated = rows_of(path)
        with closing(sqlite3.connect(path)) as conn, conn:
            backoff_on_jobs(conn)  # again, as a file of version 0 gets every migration: it changes nothing
        assert rows_of(path) == migrated
        retried = store.finish_attempt(reload(store, slow["running"]), result(Outcome.FAILED, "boom"))
        assert retried is not None
        assert retried.scheduledAt == retried.updatedAt + SLOW.delay(1)
