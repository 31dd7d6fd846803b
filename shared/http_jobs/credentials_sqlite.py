"""CredentialStore on the SQLite store's file: table `credentials`, one row per (tenant, name) holding the sealed
value; each change one write transaction (the write lock makes "at most MAX_PER_TENANT" one decision)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Final

from shared.http_jobs.credentials import MAX_PER_TENANT, CredentialInfo, TooManyCredentials
from shared.sealing import Sealed
from shared.store.sqlite import SqliteJobStore, TablesOnFirstUse, _from_ms, _to_ms

_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS credentials (
        tenantId    TEXT NOT NULL,
        name        TEXT NOT NULL,
        keyId       TEXT NOT NULL,              -- the key that sealed the value (shared/sealing.py)
        sealed      BLOB NOT NULL,              -- nonce, ciphertext and tag: never the value itself
        createdAt   INTEGER NOT NULL,           -- unix milliseconds, UTC
        updatedAt   INTEGER NOT NULL,
        PRIMARY KEY (tenantId, name)
    )""",
)


class SqliteCredentials:
    def __init__(self, store: SqliteJobStore) -> None:
        self._store = store
        self._tables = TablesOnFirstUse(store, _SCHEMA)

    def put(self, tenant_id: str, name: str, sealed: Sealed, now: datetime) -> tuple[CredentialInfo, bool]:
        self._tables.ensure()
        at = _to_ms(now)
        with self._store._write() as conn:
            row = conn.execute(
                "SELECT createdAt FROM credentials WHERE tenantId = ? AND name = ?", (tenant_id, name)
            ).fetchone()
            if row is not None:
                conn.execute(
                    "UPDATE credentials SET keyId = ?, sealed = ?, updatedAt = ? WHERE tenantId = ? AND name = ?",
                    (sealed.key_id, sealed.blob, at, tenant_id, name),
                )
                return CredentialInfo(tenant_id, name, _from_ms(int(row[0])), now), False
            (count,) = conn.execute("SELECT count(*) FROM credentials WHERE tenantId = ?", (tenant_id,)).fetchone()
            if count >= MAX_PER_TENANT:
                raise TooManyCredentials(tenant_id)
            conn.execute(
                "INSERT INTO credentials (tenantId, name, keyId, sealed, createdAt, updatedAt) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (tenant_id, name, sealed.key_id, sealed.blob, at, at),
            )
        return CredentialInfo(tenant_id, name, now, now), True

    def listed(self, tenant_id: str) -> list[CredentialInfo]:
        self._tables.ensure()
        with self._store._read() as conn:
            rows = conn.execute(
                "SELECT name, createdAt, updatedAt FROM credentials WHERE tenantId = ? ORDER BY name", (tenant_id,)
            ).fetchall()
        return [CredentialInfo(tenant_id, str(r[0]), _from_ms(int(r[1])), _from_ms(int(r[2]))) for r in rows]

    def sealed(self, tenant_id: str, name: str) -> Sealed | None:
        self._tables.ensure()
        with self._store._read() as conn:
            row = conn.execute(
                "SELECT keyId, sealed FROM credentials WHERE tenantId = ? AND name = ?", (tenant_id, name)
            ).fetchone()
        return None if row is None else Sealed(str(row[0]), bytes(row[1]))

    def remove(self, tenant_id: str, name: str) -> bool:
        self._tables.ensure()
        with self._store._write() as conn:
            cursor = conn.execute("DELETE FROM credentials WHERE tenantId = ? AND name = ?", (tenant_id, name))
        return cursor.rowcount > 0

    def missing(self, tenant_id: str, names: Collection[str]) -> set[str]:
        wanted = sorted(set(names))
        if not wanted:
            return set()
        self._tables.ensure()
        with self._store._read() as conn:
            rows = conn.execute(
                f"SELECT name FROM credentials WHERE tenantId = ? AND name IN ({', '.join('?' * len(wanted))})",
                (tenant_id, *wanted),
            ).fetchall()
        return set(wanted) - {str(r[0]) for r in rows}
