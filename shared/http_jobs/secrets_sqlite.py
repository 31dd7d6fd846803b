"""SigningSecrets on the SQLite store's file: table `signing_secrets`, each change one write transaction (the
write lock makes its count and its insert one decision)."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Final

from shared.http_jobs.secrets import MAX_LIVE, SigningSecret, TooManySecrets
from shared.store.sqlite import SqliteJobStore, TablesOnFirstUse, _from_ms, _to_ms

_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS signing_secrets (
        id          TEXT PRIMARY KEY,
        tenantId    TEXT NOT NULL,
        secret      TEXT NOT NULL,
        createdAt   INTEGER NOT NULL            -- unix milliseconds, UTC
    )""",
    "CREATE INDEX IF NOT EXISTS tenant_signing_secrets ON signing_secrets (tenantId, createdAt)",
)


class SqliteSigningSecrets:
    def __init__(self, store: SqliteJobStore) -> None:
        self._store = store
        self._tables = TablesOnFirstUse(store, _SCHEMA)

    def _ensure_table(self) -> None:
        self._tables.ensure()

    def live(self, tenant_id: str) -> list[SigningSecret]:
        self._ensure_table()
        with self._store._read() as conn:
            rows = conn.execute(
                "SELECT id, tenantId, secret, createdAt FROM signing_secrets WHERE tenantId = ? ORDER BY rowid",
                (tenant_id,),
            ).fetchall()
        return [SigningSecret(str(r[0]), str(r[1]), str(r[2]), _from_ms(int(r[3]))) for r in rows]

    def add(self, tenant_id: str, now: datetime) -> SigningSecret:
        made = SigningSecret.new(tenant_id, now)
        self._ensure_table()
        with self._store._write() as conn:
            (count,) = conn.execute("SELECT count(*) FROM signing_secrets WHERE tenantId = ?", (tenant_id,)).fetchone()
            if count >= MAX_LIVE:
                raise TooManySecrets(tenant_id)
            self._insert(conn, made)
        return made

    def remove(self, tenant_id: str, secret_id: str) -> bool:
        self._ensure_table()
        with self._store._write() as conn:
            cursor = conn.execute("DELETE FROM signing_secrets WHERE tenantId = ? AND id = ?", (tenant_id, secret_id))
        return cursor.rowcount > 0

    def first(self, tenant_id: str, now: datetime) -> list[SigningSecret]:
        found = self.live(tenant_id)
        if found:
            return found
        with self._store._write() as conn:
            if conn.execute("SELECT 1 FROM signing_secrets WHERE tenantId = ?", (tenant_id,)).fetchone() is None:
                self._insert(conn, SigningSecret.new(tenant_id, now))
        return self.live(tenant_id)

    @staticmethod
    def _insert(conn: sqlite3.Connection, secret: SigningSecret) -> None:
        conn.execute(
            "INSERT INTO signing_secrets (id, tenantId, secret, createdAt) VALUES (?, ?, ?, ?)",
            (secret.id, secret.tenantId, secret.secret, _to_ms(secret.createdAt)),
        )
