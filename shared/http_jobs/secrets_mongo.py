"""SigningSecrets on the MongoDB store's database: collection `signing_secrets`, one document per tenant
(`_id`: the tenant) holding its secrets, so that "at most MAX_LIVE" is one guarded update of one document: an
upsert whose filter finds no document with room inserts one with the tenant's `_id`, which the unique `_id`
refuses when the tenant's document exists (full)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pymongo.collection import Collection
from pymongo.errors import DuplicateKeyError

from shared.http_jobs.secrets import MAX_LIVE, SigningSecret, TooManySecrets
from shared.store.mongo import MongoJobStore, translate_errors

Document = dict[str, Any]


class MongoSigningSecrets:
    def __init__(self, store: MongoJobStore) -> None:
        self._secrets: Collection[Document] = store._db["signing_secrets"]

    def live(self, tenant_id: str) -> list[SigningSecret]:
        with translate_errors():
            doc = self._secrets.find_one({"_id": tenant_id})
        kept = doc.get("secrets", []) if doc else []
        return [SigningSecret(s["id"], tenant_id, s["secret"], s["createdAt"]) for s in kept]  # pushed in order

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
        entry = {"id": secret.id, "secret": secret.secret, "createdAt": secret.createdAt}
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
