"""The JobStore contract's fixtures: every test runs once per implementation.

`store` is a fresh, empty store: SQLite on a temp file of its own, or MongoJobStore on the test's own database
(FerretDB 2 in `make test`: docs/ferretdb.md). The MongoDB half is marked `servers`, so
`pytest -m "not servers"` runs the SQLite half with no server.
`harness` adds what a test needs beside the protocol: more store instances on the same data (a second
process), raw writes that bypass the store (a state that earlier versions wrote), injected failures, and a
store whose database cannot be reached.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from bson import ObjectId
from pymongo.database import Database
from pymongo.errors import AutoReconnect

from shared.model import Job, Status, utc_now
from shared.store.base import JobStore
from shared.store.mongo import MongoJobStore
from shared.store.sqlite import SqliteJobStore
from shared.store.sqlite import writes as sqlite_writes
from tests.contract.store_kit import new
from tests.support import free_port

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("mongo", id="mongo", marks=pytest.mark.servers),
]


class Harness:
    """One implementation under test, and the means to open, bend and break it."""

    def __init__(self, backend: str, open_store: Callable[[], JobStore]) -> None:
        self.backend = backend
        self._open_store = open_store
        self._opened: list[JobStore] = []
        self.store = self.open()
        self.store.ensure_schema()

    def open(self) -> JobStore:
        """Another store instance on the same data, as a second process would have."""
        store = self._open_store()
        self._opened.append(store)
        return store

    def close_all(self) -> None:
        for store in self._opened:
            store.close()

    def force_status(self, job_id: str, status: Status) -> None:
        """Overwrite a job's status behind the store's back."""
        raise NotImplementedError

    def failing_next_job_update(self, monkeypatch: pytest.MonkeyPatch) -> AbstractContextManager[None]:
        """While active, the store's next conditional write to a job fails as if the database went away: the
        write that starts or closes an attempt."""
        raise NotImplementedError

    def unreachable(self) -> JobStore:
        """A store whose database cannot be used at all."""
        raise NotImplementedError


class SqliteHarness(Harness):
    def __init__(self, path: Path) -> None:
        self.path = path
        super().__init__("sqlite", lambda: SqliteJobStore(path))

    def force_status(self, job_id: str, status: Status) -> None:
        with sqlite3.connect(self.path) as conn:
            conn.execute("UPDATE jobs SET status = ? WHERE id = ?", (status.value, job_id))
        conn.close()

    @contextmanager
    def failing_next_job_update(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
        real = sqlite_writes.guarded_update
        calls = {"n": 0}

        def fail_once(*args: Any, **kwargs: Any) -> Any:
            calls["n"] += 1
            if calls["n"] == 1:
                error = sqlite3.OperationalError("disk I/O error (injected)")
                error.sqlite_errorcode = sqlite3.SQLITE_IOERR
                raise error
            return real(*args, **kwargs)

        with monkeypatch.context() as patch:
            patch.setattr(sqlite_writes, "guarded_update", fail_once)
            yield
        assert calls["n"] >= 1, "the injected failure was never reached"

    def unreachable(self) -> JobStore:
        store = SqliteJobStore(self.path.parent / "no-such-directory" / "jobs.db")
        self._opened.append(store)
        return store


class MongoHarness(Harness):
    def __init__(self, uri: str, db: Database[dict[str, object]]) -> None:
        self.uri = uri
        self.db = db
        super().__init__("mongo", lambda: MongoJobStore.connect(uri, db.name))

    def force_status(self, job_id: str, status: Status) -> None:
        self.db["jobs"].update_one({"_id": ObjectId(job_id)}, {"$set": {"status": status.value}})

    @contextmanager
    def failing_next_job_update(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
        store = self.store
        assert isinstance(store, MongoJobStore)
        jobs = store.database.jobs
        calls = {"n": 0}

        class FailingJobs:
            """The jobs collection, except that the first conditional write (find_one_and_update, or update_many
            and bulk_write for the store's batched writes) loses the connection."""

            def __getattr__(self, name: str) -> Any:
                return getattr(jobs, name)

            def _fail_first(self, write: Any, *args: Any, **kwargs: Any) -> Any:
                calls["n"] += 1
                if calls["n"] == 1:
                    raise AutoReconnect("connection lost (injected)")
                return write(*args, **kwargs)

            def find_one_and_update(self, *args: Any, **kwargs: Any) -> Any:
                return self._fail_first(jobs.find_one_and_update, *args, **kwargs)

            def update_many(self, *args: Any, **kwargs: Any) -> Any:
                return self._fail_first(jobs.update_many, *args, **kwargs)

            def bulk_write(self, *args: Any, **kwargs: Any) -> Any:
                return self._fail_first(jobs.bulk_write, *args, **kwargs)

        with monkeypatch.context() as patch:
            patch.setattr(store.database, "jobs", FailingJobs())
            yield
        assert calls["n"] >= 1, "the injected failure was never reached"

    def unreachable(self) -> JobStore:
        store = MongoJobStore.connect(f"mongodb://127.0.0.1:{free_port()}/?directConnection=true", "x", timeout_ms=300)
        self._opened.append(store)
        return store


@pytest.fixture(params=BACKENDS)
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    made: Harness
    if request.param == "sqlite":
        made = SqliteHarness(tmp_path / "jobs.db")
    else:
        # Only the mongo halves ask for the servers (started by the session fixtures when MONGO_URI is unset).
        uri, db = request.getfixturevalue("mongo_uri"), request.getfixturevalue("mongo_db")
        made = MongoHarness(uri, db)
    yield made
    made.close_all()


@pytest.fixture
def store(harness: Harness) -> JobStore:
    return harness.store


@pytest.fixture
def line(store: JobStore) -> dict[str, Job]:
    """Due runs in a known claim order, and jobs that must never be claimed with them."""
    now = utc_now()
    made = {
        "p5-old": new(priority=5, scheduledAt=now - timedelta(minutes=2)),
        "p5-new": new(priority=5, scheduledAt=now - timedelta(minutes=1)),
        "p0": new(priority=0, scheduledAt=now - timedelta(minutes=3)),
        "p-1": new(priority=-1, scheduledAt=now - timedelta(minutes=10)),
        "template": new(priority=100, cron="* * * * *", scheduledAt=now - timedelta(minutes=5)),
        "future": new(priority=100, scheduledAt=now + timedelta(hours=1)),
        "other-type": new(priority=100, jobType="other"),
    }
    return {name: store.create(job) for name, job in made.items()}


CLAIM_ORDER = ["p5-old", "p5-new", "p0", "p-1"]
