"""The job-type registry that lives beside a given job store (same database, same connections)."""

from __future__ import annotations

from shared.store.base import JobStore
from shared.store.job_types import JobTypeRegistry
from shared.store.job_types_mongo import MongoJobTypes
from shared.store.job_types_sqlite import SqliteJobTypes
from shared.store.mongo import MongoJobStore
from shared.store.sqlite import SqliteJobStore


def type_registry_of(store: JobStore) -> JobTypeRegistry:
    if isinstance(store, SqliteJobStore):
        return SqliteJobTypes(store)
    if isinstance(store, MongoJobStore):
        return MongoJobTypes(store)
    raise TypeError(f"no job-type registry for {type(store).__name__}")
