"""CredentialStore on the MongoDB database: collection `credentials`, one document per tenant (`_id`: the
tenant) holding its credentials as an array, so that "at most MAX_PER_TENANT" is one guarded update of one
document (as signing secrets are kept, signing_secrets.py): a new name is pushed only while the array has room and
lacks the name, and an upsert that finds no such document inserts one with the tenant's `_id`, which the unique
`_id` refuses when the tenant's document exists (full, or holding the name since)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Final

from pymongo.collection import Collection as MongoCollection
from pymongo.errors import DuplicateKeyError

from shared.http_jobs.credentials import MAX_PER_TENANT, CredentialInfo, TooManyCredentials
from shared.sealing import Sealed
from shared.store.mongo.database import Document, MongoDatabase, translate_errors

ATTEMPTS: Final = 3  # a replace and a push each lose only to a concurrent change of the same name


class MongoCredentials:
    def __init__(self, database: MongoDatabase) -> None:
        self._docs: MongoCollection[Document] = database.collection("credentials")

    def put(self, tenant_id: str, name: str, sealed: Sealed, now: datetime) -> tuple[CredentialInfo, bool]:
        for _ in range(ATTEMPTS):
            replaced = self._replace(tenant_id, name, sealed, now)
            if replaced is not None:
                return replaced, False
            entry = {"name": name, "keyId": sealed.key_id, "sealed": sealed.blob, "createdAt": now, "updatedAt": now}
            with translate_errors():
                try:
                    self._docs.update_one(
                        {
                            "_id": tenant_id,
                            "credentials.name": {"$ne": name},
                            f"credentials.{MAX_PER_TENANT - 1}": {"$exists": False},
                        },
                        {"$push": {"credentials": entry}},
                        upsert=True,
                    )
                    return CredentialInfo(tenant_id, name, now, now), True
                except DuplicateKeyError:  # full, or the name was set meanwhile: then it is replaced above
                    pass
        raise TooManyCredentials(tenant_id)

    def _replace(self, tenant_id: str, name: str, sealed: Sealed, now: datetime) -> CredentialInfo | None:
        fields = {"keyId": sealed.key_id, "sealed": sealed.blob, "updatedAt": now}
        with translate_errors():
            replaced = self._docs.update_one(
                {"_id": tenant_id, "credentials.name": name},
                {"$set": {f"credentials.$.{field}": value for field, value in fields.items()}},
            )
            if not replaced.matched_count:
                return None
            # Its createdAt, for the answer (FerretDB projects no $elemMatch in find_one_and_update).
            doc = self._docs.find_one({"_id": tenant_id}, {"credentials": {"$elemMatch": {"name": name}}})
        found = doc.get("credentials") if doc else None
        return _info(tenant_id, found[0]) if found else CredentialInfo(tenant_id, name, now, now)

    def listed(self, tenant_id: str) -> list[CredentialInfo]:
        with translate_errors():
            doc = self._docs.find_one({"_id": tenant_id}, {"credentials.sealed": 0})
        kept = doc.get("credentials", []) if doc else []
        return sorted((_info(tenant_id, c) for c in kept), key=lambda c: c.name)

    def sealed(self, tenant_id: str, name: str) -> Sealed | None:
        with translate_errors():
            doc = self._docs.find_one({"_id": tenant_id}, {"credentials": {"$elemMatch": {"name": name}}})
        found = doc.get("credentials") if doc else None
        return Sealed(str(found[0]["keyId"]), bytes(found[0]["sealed"])) if found else None

    def remove(self, tenant_id: str, name: str) -> bool:
        with translate_errors():
            pulled = self._docs.update_one({"_id": tenant_id}, {"$pull": {"credentials": {"name": name}}})
        return pulled.modified_count > 0

    def missing(self, tenant_id: str, names: Collection[str]) -> set[str]:
        wanted = set(names)
        if not wanted:
            return set()
        with translate_errors():
            doc = self._docs.find_one({"_id": tenant_id}, {"credentials.name": 1})
        return wanted - {str(c["name"]) for c in (doc.get("credentials", []) if doc else [])}


def _info(tenant_id: str, entry: Document) -> CredentialInfo:
    return CredentialInfo(tenant_id, str(entry["name"]), entry["createdAt"], entry["updatedAt"])
