"""SigningSecrets on the MongoDB database: collection `signing_secrets`, one document per tenant
(`_id`: the tenant) holding its secrets, so that "at most MAX_LIVE" is one guarded update of one document: an
upsert whose filter finds no document with room inserts one with the tenant's `_id`, which the unique `_id`
refuses when the tenant's document exists (full). Values are kept as secrets_sealed.py says; the secrets a
database holds in the clear are sealed the first time a process with the key uses them."""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from typing import Final

from pymongo.collection import Collection
from pymongo.errors import DuplicateKeyError

from shared.http_jobs.secrets import MAX_LIVE, SigningSecret, TooManySecrets
from shared.http_jobs.secrets_sealed import KeptSecret, kept, opened, sealed_in_place
from shared.sealing import Keyring
from shared.store.mongo.database import Document, MongoDatabase, translate_errors

log = logging.getLogger("jobsched.secrets")
SEAL_ATTEMPTS: Final = 3  # a tenant's document changed between its read and its sealing: read it again


class MongoSigningSecrets:
    def __init__(self, database: MongoDatabase, keyring: Keyring) -> None:
        self._secrets: Collection[Document] = database.collection("signing_secrets")
        self._keyring = keyring
        self._upgraded = False
        self._upgrade_lock = threading.Lock()

    def live(self, tenant_id: str) -> list[SigningSecret]:
        self._upgrade()
        with translate_errors():
            doc = self._secrets.find_one({"_id": tenant_id})
        kept_ = doc.get("secrets", []) if doc else []
        return [  # pushed in order
            SigningSecret(s["id"], tenant_id, opened(tenant_id, s["id"], _kept(s), self._keyring), s["createdAt"])
            for s in kept_
        ]

    def add(self, tenant_id: str, now: datetime) -> SigningSecret:
        made = SigningSecret.new(tenant_id, now)
        if not self._pushed(tenant_id, made, room_below=MAX_LIVE):
            raise TooManySecrets(tenant_id)
        return made

    def remove(self, tenant_id: str, secret_id: str) -> bool:
        with translate_errors():
            pulled = self._secrets.update_one({"_id": tenant_id}, {"$pull": {"secrets": {"id": secret_id}}})
        return pulled.modified_count > 0

    def first(self, tenant_id: str, now: datetime) -> list[SigningSecret]:
        found = self.live(tenant_id)
        if not found:
            self._pushed(tenant_id, SigningSecret.new(tenant_id, now), room_below=1)
            found = self.live(tenant_id)
        return found

    def _pushed(self, tenant_id: str, secret: SigningSecret, *, room_below: int) -> bool:
        """Push `secret` when the tenant has fewer than `room_below` secrets."""
        entry = {"id": secret.id, **_fields(kept(tenant_id, secret.id, secret.secret, self._keyring))}
        entry["createdAt"] = secret.createdAt
        with translate_errors():
            try:
                self._secrets.update_one(
                    {"_id": tenant_id, f"secrets.{room_below - 1}": {"$exists": False}},
                    {"$push": {"secrets": entry}},
                    upsert=True,
                )
            except DuplicateKeyError:
                return False
        return True

    def _upgrade(self) -> None:
        """Once per process with a key: seal every secret the database keeps in the clear (written before it)."""
        if self._upgraded or not self._keyring.available:
            return
        with self._upgrade_lock:
            if self._upgraded:
                return
            with translate_errors():
                # Only an entry kept in the clear has a `secret` field (_fields).
                tenants = [d["_id"] for d in self._secrets.find({"secrets.secret": {"$exists": True}}, {"_id": 1})]
                sealed = sum(self._seal_tenant(tenant) for tenant in tenants)
            if sealed:
                log.info("signing secrets sealed", extra={"action": "signing_secrets_sealed", "count": sealed})
            self._upgraded = True

    def _seal_tenant(self, tenant_id: str) -> int:
        """Seal the tenant's secrets kept in the clear: a compare-and-set of its whole array, so a secret added or
        removed meanwhile is neither lost nor brought back (then it is read again)."""
        for _ in range(SEAL_ATTEMPTS):
            doc = self._secrets.find_one({"_id": tenant_id})
            if doc is None:
                return 0
            before = doc.get("secrets", [])
            after, count = [], 0
            for entry in before:
                upgraded = sealed_in_place(tenant_id, entry["id"], _kept(entry), self._keyring)
                count += upgraded is not None
                clear = {k: v for k, v in entry.items() if k != "secret"}  # the value goes, not only its mark
                after.append(entry if upgraded is None else {**clear, **_fields(upgraded)})
            if not count:
                return 0
            if self._secrets.update_one(
                {"_id": tenant_id, "secrets": before}, {"$set": {"secrets": after}}
            ).matched_count:
                return count
        return 0  # changing under us each time: the next process start seals it


def _kept(entry: Document) -> KeptSecret:
    sealed = entry.get("sealed")
    return KeptSecret(str(entry.get("secret", "")), entry.get("keyId"), None if sealed is None else bytes(sealed))


def _fields(value: KeptSecret) -> Document:
    """The entry's value fields: the sealed ones only, or the clear one only (as before the key)."""
    if value.sealed is None:
        return {"secret": value.secret}
    return {"keyId": value.key_id, "sealed": value.sealed}
