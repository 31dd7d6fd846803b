"""The job-type registry that lives beside a given job store (same database, same connections)."""

from __future__ import annotations

from shared.job_types.announcements import JobTypeRegistry
from shared.store.base import JobStore


def type_registry_of(store: JobStore) -> JobTypeRegistry:
    # Imported here, by the store's kind: the embedded mode does not load the MongoDB driver.
    from shared.store.sqlite import SqliteJobStore

    if isinstance(store, SqliteJobStore):
        from shared.job_types.announcements_sqlite import SqliteJobTypes

        return SqliteJobTypes(store)
    from shared.store.mongo import MongoJobStore

    if isinstance(store, MongoJobStore):
        from shared.job_types.announcements_mongo import MongoJobTypes

        return MongoJobTypes(store)
    raise TypeError(f"no job-type registry for {type(store).__name__}")
