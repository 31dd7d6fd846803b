"""CredentialStore in the SQLite file: table `credentials` (migrations.py), one row per (tenant, name) holding the
sealed value; each change one write transaction (the write lock makes "at most MAX_PER_TENANT" one decision)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from shared.http_jobs.credentials import MAX_PER_TENANT, CredentialInfo, TooManyCredentials
from shared.sealing import Sealed
from shared.store.sqlite.codecs import from_ms, to_ms
from shared.store.sqlite.database import SqliteDatabase


class SqliteCredentials:
    def __init__(self, database: SqliteDatabase) -> None:
        self._database = database

    def put(self, tenant_id: str, name: str, sealed: Sealed, now: datetime) -> tuple[CredentialInfo, bool]:
        at = to_ms(now)
        with self._database.write() as conn:
            row = conn.execute(
                "SELECT createdAt FROM credentials WHERE tenantId = ? AND name = ?", (tenant_id, name)
            ).fetchone()
            if row is not None:
                conn.execute(
                    "UPDATE credentials SET keyId = ?, sealed = ?, updatedAt = ? WHERE tenantId = ? AND name = ?",
                    (sealed.key_id, sealed.blob, at, tenant_id, name),
                )
                return CredentialInfo(tenant_id, name, from_ms(int(row[0])), now), False
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
        with self._database.read() as conn:
            rows = conn.execute(
                "SELECT name, createdAt, updatedAt FROM credentials WHERE tenantId = ? ORDER BY name", (tenant_id,)
            ).fetchall()
        return [CredentialInfo(tenant_id, str(r[0]), from_ms(int(r[1])), from_ms(int(r[2]))) for r in rows]

    def sealed(self, tenant_id: str, name: str) -> Sealed | None:
        with self._database.read() as conn:
            row = conn.execute(
                "SELECT keyId, sealed FROM credentials WHERE tenantId = ? AND name = ?", (tenant_id, name)
            ).fetchone()
        return None if row is None else Sealed(str(row[0]), bytes(row[1]))

    def remove(self, tenant_id: str, name: str) -> bool:
        with self._database.write() as conn:
            cursor = conn.execute("DELETE FROM credentials WHERE tenantId = ? AND name = ?", (tenant_id, name))
        return cursor.rowcount > 0

    def missing(self, tenant_id: str, names: Collection[str]) -> set[str]:
        wanted = sorted(set(names))
        if not wanted:
            return set()
        with self._database.read() as conn:
            rows = conn.execute(
                f"SELECT name FROM credentials WHERE tenantId = ? AND name IN ({', '.join('?' * len(wanted))})",
                (tenant_id, *wanted),
            ).fetchall()
        return set(wanted) - {str(r[0]) for r in rows}
