"""The database's schema version, and `ensure_schema`, which brings a database to the latest (migrations.py).

The version is one document, `{_id: "schema_version", version: n}` in the collection `schema`: the number of the
last migration applied. Every process that applies schema (ensure_schema, at its start) reads it and applies the
migrations after it, advancing the version after each. A database without it, empty or written before numbered
migrations, is at version 0 and gets them all. Replicas starting together may run one migration at the same time
(each may run again); the version only rises, so each ends at the latest and none takes it backwards. A version
above the latest this code knows was written by a later jobsched: SchemaTooNew, and the database is left as it is.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Final

from pymongo.errors import DuplicateKeyError

from shared.store.base import SchemaTooNew
from shared.store.deadlocks import retry_deadlocks
from shared.store.mongo.database import MongoDatabase, translate_errors
from shared.store.mongo.migrations import LATEST, MIGRATIONS

VERSION_COLLECTION: Final = "schema"
VERSION_ID: Final = "schema_version"
log = logging.getLogger("jobsched.store")


def ensure_schema(database: MongoDatabase) -> None:
    """migrate, run again while the server aborts it as a deadlock's victim (shared/store/deadlocks.py: replicas
    starting together on a database of an earlier version); again, it starts from the version then recorded."""
    with translate_errors():
        retry_deadlocks(partial(migrate, database))


def migrate(database: MongoDatabase) -> None:
    """The pending migrations once, without ensure_schema's retry (loadtest/write_races.py races it bare)."""
    found = schema_version(database)
    if found > LATEST:
        raise SchemaTooNew(found, LATEST)
    for version in range(found + 1, LATEST + 1):
        migration = MIGRATIONS[version - 1]
        migration(database)
        _advance(database, version)
        log.info(
            "schema migrated",
            extra={"action": "schema_migrated", "version": version, "migration": migration.__name__},
        )


def schema_version(database: MongoDatabase) -> int:
    """The number of the last migration applied to the database; 0 when none was recorded."""
    doc = database.collection(VERSION_COLLECTION).find_one({"_id": VERSION_ID})
    return int(doc["version"]) if doc else 0


def _advance(database: MongoDatabase, version: int) -> None:
    """The recorded version is `version` or more: $max leaves a later one, which a replica further on recorded.
    Replicas recording the first version at once all upsert; the one whose insert loses to another's (duplicate
    _id) updates the document that now exists."""
    versions = database.collection(VERSION_COLLECTION)
    raised = {"$max": {"version": version}}
    try:
        versions.update_one({"_id": VERSION_ID}, raised, upsert=True)
    except DuplicateKeyError:
        versions.update_one({"_id": VERSION_ID}, raised)
