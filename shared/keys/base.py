"""The KeyStore seam: where API keys are kept (as digests, never the keys themselves).

Every docstring here is the contract that each implementation (MongoDB, SQLite) meets and that
tests/contract/test_key_store.py checks. A key record changes only twice: it is inserted, and it may be
revoked; when a key was last used is kept apart, so that no write of usage can ever undo a revocation.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from shared.model import wire_fields
from shared.store.base import StoreError


class Role(StrEnum):
    """What a key may do; each role includes the ones before it."""

    READER = "reader"  # GET only
    WRITER = "writer"  # also create, cancel, retry and the other changes to its tenant's jobs
    ADMIN = "admin"  # also every tenant, and key management

    def includes(self, needed: Role) -> bool:
        order = list(Role)
        return order.index(self) >= order.index(needed)


@dataclass(frozen=True)
class ApiKey:
    """One key's record. `keyHash` is the digest of the key (tokens.digest); the key itself is never kept."""

    prefix: str
    tenantId: str
    role: Role
    keyHash: str = field(metadata={"wire": False})
    createdAt: datetime
    name: str | None = None
    lastUsedAt: datetime | None = None
    revokedAt: datetime | None = None

    def to_wire(self) -> dict[str, Any]:
        """What a listing shows: everything but the digest; times RFC 3339, unset fields omitted."""
        return wire_fields(self)


class PrefixTaken(StoreError):
    def __init__(self, prefix: str) -> None:
        super().__init__(f"an API key with prefix {prefix!r} already exists")
        self.prefix = prefix


class KeyStore(Protocol):
    def ensure_schema(self) -> None:
        """Apply the database's pending migrations, as the job store's ensure_schema does (one schema version per
        database); called at every start-up."""

    def close(self) -> None:
        """Release connections."""

    def insert(self, key: ApiKey) -> None:
        """Add a key record. Raise PrefixTaken when a key with its prefix exists (atomic under races)."""

    def find(self, prefix: str) -> ApiKey | None:
        """The key with this prefix (revoked or not), with its lastUsedAt; None when there is none."""

    def list_keys(self, tenant_id: str | None = None) -> list[ApiKey]:
        """Every key (of one tenant when given), revoked ones included, newest createdAt first, each with its
        lastUsedAt. This is also what every API replica reloads to authenticate requests."""

    def revoke(self, prefix: str, at: datetime) -> ApiKey | None:
        """Mark the key revoked at `at` and return it; a key revoked before keeps its first revokedAt (so
        revoking is idempotent). None when there is no such key."""

    def record_use(self, prefixes: Collection[str], at: datetime) -> None:
        """Keys were used at `at`: lastUsedAt becomes `at` unless it is later already (replicas report out of
        order). Never changes a key record itself."""
