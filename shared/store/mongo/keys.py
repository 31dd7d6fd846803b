"""KeyStore on MongoDB: `api_keys` (one document per key, `_id` = its prefix, so the insert decides a prefix's
owner atomically) and `api_key_usage` (`_id` = prefix, `lastUsedAt`), kept apart so that recording use never
rewrites a key document: a revocation then never races with the use that a busy key records on every
refresh."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from pymongo import DESCENDING
from pymongo.collection import Collection as MongoCollection
from pymongo.errors import DuplicateKeyError

from shared.keys.base import ApiKey, PrefixTaken, Role
from shared.store.mongo import schema
from shared.store.mongo.database import Document, MongoDatabase, translate_errors


class MongoKeyStore:
    def __init__(self, database: MongoDatabase) -> None:
        self._database = database
        self._keys: MongoCollection[Document] = database.collection("api_keys")
        self._usage: MongoCollection[Document] = database.collection("api_key_usage")

    @classmethod
    def connect(cls, uri: str, database: str, *, timeout_ms: int = 5000) -> MongoKeyStore:
        return cls(MongoDatabase.connect(uri, database, timeout_ms=timeout_ms))

    def close(self) -> None:
        self._database.close()

    def ensure_schema(self) -> None:
        """The database's pending migrations (schema.py), as the job store applies them: keys need no index beyond
        `_id` (they are few, and every replica reads them all), but the keys command may be the first to open a
        database, and one that a later jobsched migrated is refused here too (SchemaTooNew)."""
        schema.ensure_schema(self._database)

    def insert(self, key: ApiKey) -> None:
        with translate_errors():
            try:
                self._keys.insert_one(_to_document(key))
            except DuplicateKeyError as exc:
                raise PrefixTaken(key.prefix) from exc

    def find(self, prefix: str) -> ApiKey | None:
        with translate_errors():
            doc = self._keys.find_one({"_id": prefix})
            usage = self._usage.find_one({"_id": prefix}) if doc else None
        return _to_key(doc, usage) if doc else None

    def list_keys(self, tenant_id: str | None = None) -> list[ApiKey]:
        query = {} if tenant_id is None else {"tenantId": tenant_id}
        with translate_errors():
            docs = list(self._keys.find(query).sort([("createdAt", DESCENDING), ("_id", DESCENDING)]))
            used = {u["_id"]: u for u in self._usage.find({"_id": {"$in": [d["_id"] for d in docs]}})} if docs else {}
        return [_to_key(d, used.get(d["_id"])) for d in docs]

    def revoke(self, prefix: str, at: datetime) -> ApiKey | None:
        with translate_errors():
            self._keys.update_one({"_id": prefix, "revokedAt": None}, {"$set": {"revokedAt": at}})
        return self.find(prefix)

    def record_use(self, prefixes: Collection[str], at: datetime) -> None:
        """One upsert per key: few keys are used within one refresh."""
        with translate_errors():
            for prefix in sorted(prefixes):
                update = {"$max": {"lastUsedAt": at}}
                try:
                    self._usage.update_one({"_id": prefix}, update, upsert=True)
                except DuplicateKeyError:  # another replica inserted the key's first use just now
                    self._usage.update_one({"_id": prefix}, update)


def _to_document(key: ApiKey) -> Document:
    return {
        "_id": key.prefix,
        "tenantId": key.tenantId,
        "role": key.role.value,
        "keyHash": key.keyHash,
        "name": key.name,
        "createdAt": key.createdAt,
        "revokedAt": key.revokedAt,
    }


def _to_key(doc: Document, usage: Document | None) -> ApiKey:
    return ApiKey(
        prefix=str(doc["_id"]),
        tenantId=doc["tenantId"],
        role=Role(doc["role"]),
        keyHash=doc["keyHash"],
        createdAt=doc["createdAt"],
        name=doc.get("name"),
        lastUsedAt=usage.get("lastUsedAt") if usage else None,
        revokedAt=doc.get("revokedAt"),
    )
