"""KeyStore on SQLite: table `api_keys` (migrations.py) in the same database file as the jobs of `jobsched dev`.

Keys are read every few seconds and written rarely, so each operation opens its own connection (WAL: a
reader never waits for the job store's writer; a writer waits for the file lock up to `timeout`). Usage
sits in the key's row: a write here is a transaction, so it can never undo a revocation.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Collection, Iterator
from contextlib import closing, contextmanager
from datetime import datetime

from shared.keys.base import ApiKey, PrefixTaken, Role
from shared.store.sqlite import schema
from shared.store.sqlite.codecs import from_ms, to_ms
from shared.store.sqlite.database import create_private, translate_errors, use_wal


class SqliteKeyStore:
    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 5.0) -> None:
        self.path = os.fspath(path)
        self._timeout = timeout

    def close(self) -> None:
        """Nothing held between operations."""

    def ensure_schema(self) -> None:
        """The whole file to the latest version, api_keys with the rest: one version per file (schema.py)."""
        schema.ensure_schema(self._write)

    def insert(self, key: ApiKey) -> None:
        row = (key.prefix, key.tenantId, key.role.value, key.keyHash, key.name, to_ms(key.createdAt))
        try:
            with self._write() as conn:
                conn.execute(
                    "INSERT INTO api_keys (prefix, tenantId, role, keyHash, name, createdAt) VALUES (?, ?, ?, ?, ?, ?)",
                    row,
                )
        except sqlite3.IntegrityError as exc:
            if getattr(exc, "sqlite_errorcode", None) != sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
                raise
            raise PrefixTaken(key.prefix) from exc

    def find(self, prefix: str) -> ApiKey | None:
        with self._connect() as conn:
            row = conn.execute("SELECT * FROM api_keys WHERE prefix = ?", (prefix,)).fetchone()
        return _to_key(row) if row else None

    def list_keys(self, tenant_id: str | None = None) -> list[ApiKey]:
        where, params = ("WHERE tenantId = ?", (tenant_id,)) if tenant_id is not None else ("", ())
        with self._connect() as conn:
            rows = conn.execute(f"SELECT * FROM api_keys {where} ORDER BY createdAt DESC, prefix DESC", params)
            return [_to_key(r) for r in rows.fetchall()]

    def revoke(self, prefix: str, at: datetime) -> ApiKey | None:
        with self._write() as conn:
            row = conn.execute(
                "UPDATE api_keys SET revokedAt = coalesce(revokedAt, ?) WHERE prefix = ? RETURNING *",
                (to_ms(at), prefix),
            ).fetchone()
        return _to_key(row) if row else None

    def record_use(self, prefixes: Collection[str], at: datetime) -> None:
        if not prefixes:
            return
        with self._write() as conn:
            conn.executemany(
                "UPDATE api_keys SET lastUsedAt = max(coalesce(lastUsedAt, 0), ?) WHERE prefix = ?",
                [(to_ms(at), p) for p in sorted(prefixes)],
            )

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        with translate_errors():
            create_private(self.path)
            conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None)
            with closing(conn):
                conn.row_factory = sqlite3.Row
                conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
                use_wal(conn, self._timeout)
                yield conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise


def _to_key(row: sqlite3.Row) -> ApiKey:
    return ApiKey(
        prefix=row["prefix"],
        tenantId=row["tenantId"],
        role=Role(row["role"]),
        keyHash=row["keyHash"],
        createdAt=from_ms(row["createdAt"]),
        name=row["name"],
        lastUsedAt=from_ms(row["lastUsedAt"]) if row["lastUsedAt"] is not None else None,
        revokedAt=from_ms(row["revokedAt"]) if row["revokedAt"] is not None else None,
    )
