"""Migrated MongoDB databases, reused from test to test within one pytest worker.

Migrating a new database creates its collections and some thirty indexes: on FerretDB 2 (PostgreSQL with
DocumentDB) that is a second of DDL, and dropping it a third more, for every test of the MongoDB half. A test
that starts from a migrated store gets instead a database an earlier test of this worker used, emptied: the
collections the migrations made keep their indexes and get back the documents the migrations wrote (the schema
version), and every other collection is dropped. Some 40 ms.

A database is reused only when it is as the migrations left it apart from its documents: the same collections
with the same indexes. One that a test changed otherwise (an index dropped or added, a collection missing) is
dropped, and the next test gets a new one. A database is emptied when a test takes it, not when the last one
ended, so a write that a thread of the last test made after its end, but before the take, is emptied too.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from pymongo import MongoClient
from pymongo.database import Database

Document = dict[str, object]


@dataclass(frozen=True)
class _Migrated:
    """What a freshly migrated database holds: per collection, its indexes and its documents."""

    indexes: dict[str, MutableMapping[str, Any]]
    documents: dict[str, list[Document]]

    @classmethod
    def read(cls, db: Database[Document]) -> _Migrated:
        names = db.list_collection_names()
        return cls(
            {name: db[name].index_information() for name in names},
            {name: list(db[name].find()) for name in names},
        )


@dataclass
class MigratedDatabases:
    """One worker's databases that tests of a migrated store have used, ready to be emptied for the next."""

    client: MongoClient[Document]
    migrate: Callable[[Database[Document]], None]
    _idle: list[str] = field(default_factory=list)
    _migrated: _Migrated | None = None

    def take(self, fresh_name: str) -> Database[Document]:
        """A migrated database: an idle one emptied, else `fresh_name` migrated now."""
        migrated = self._migrated  # known once a database was migrated: only then are any idle
        while migrated is not None and self._idle:
            db = self.client[self._idle.pop()]
            if self._emptied(db, migrated):
                return db
            self.client.drop_database(db.name)
        db = self.client[fresh_name]
        self.migrate(db)
        if self._migrated is None:
            self._migrated = _Migrated.read(db)
        return db

    def give_back(self, db: Database[Document]) -> None:
        self._idle.append(db.name)

    def drop_all(self) -> None:
        for name in self._idle:
            self.client.drop_database(name)
        self._idle.clear()

    @staticmethod
    def _emptied(db: Database[Document], migrated: _Migrated) -> bool:
        """Empty `db` back to what the migrations wrote; False when it differs from that in more than its
        documents (it is then left as it is)."""
        names = set(db.list_collection_names())
        if not names >= migrated.indexes.keys():
            return False
        if any(db[name].index_information() != indexes for name, indexes in migrated.indexes.items()):
            return False
        for name in names - migrated.indexes.keys():
            db.drop_collection(name)
        for name, documents in migrated.documents.items():
            db[name].delete_many({})
            if documents:
                db[name].insert_many(documents)
        return True
