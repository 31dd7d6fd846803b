"""SigningSecrets in the SQLite file: table `signing_secrets` (migrations.py), each change one write transaction
(the write lock makes its count and its insert one decision). Values are kept as secrets_sealed.py says: sealed
under the key, or in the clear by a process without one; a file written before the key is upgraded on first use."""

from __future__ import annotations

import logging
import sqlite3
import threading
from datetime import datetime

from shared.http_jobs.secrets import MAX_LIVE, SigningSecret, TooManySecrets
from shared.http_jobs.secrets_sealed import KeptSecret, kept, opened, sealed_in_place
from shared.sealing import Keyring
from shared.store.sqlite.codecs import from_ms, to_ms
from shared.store.sqlite.database import SqliteDatabase

log = logging.getLogger("jobsched.secrets")


class SqliteSigningSecrets:
    def __init__(self, database: SqliteDatabase, keyring: Keyring) -> None:
        self._database = database
        self._keyring = keyring
        self._upgraded = False
        self._upgrade_lock = threading.Lock()

    def _ensure_sealed(self) -> None:
        """At this process's first use: the values the file keeps in the clear sealed (the migrations gave the
        table its sealed columns, but have no key to seal with)."""
        with self._upgrade_lock:
            if not self._upgraded:
                with self._database.write() as conn:
                    self._seal_in_place(conn)
                self._upgraded = True

    def live(self, tenant_id: str) -> list[SigningSecret]:
        self._ensure_sealed()
        with self._database.read() as conn:
            rows = conn.execute(
                "SELECT id, tenantId, secret, keyId, sealed, createdAt FROM signing_secrets WHERE tenantId = ? "
                "ORDER BY rowid",
                (tenant_id,),
            ).fetchall()
        return [
            SigningSecret(
                str(r[0]), str(r[1]), opened(str(r[1]), str(r[0]), _kept(r), self._keyring), from_ms(int(r[5]))
            )
            for r in rows
        ]

    def add(self, tenant_id: str, now: datetime) -> SigningSecret:
        made = SigningSecret.new(tenant_id, now)
        self._ensure_sealed()
        with self._database.write() as conn:
            (count,) = conn.execute("SELECT count(*) FROM signing_secrets WHERE tenantId = ?", (tenant_id,)).fetchone()
            if count >= MAX_LIVE:
                raise TooManySecrets(tenant_id)
            self._insert(conn, made)
        return made

    def remove(self, tenant_id: str, secret_id: str) -> bool:
        self._ensure_sealed()
        with self._database.write() as conn:
            cursor = conn.execute("DELETE FROM signing_secrets WHERE tenantId = ? AND id = ?", (tenant_id, secret_id))
        return cursor.rowcount > 0

    def first(self, tenant_id: str, now: datetime) -> list[SigningSecret]:
        found = self.live(tenant_id)
        if found:
            return found
        with self._database.write() as conn:
            if conn.execute("SELECT 1 FROM signing_secrets WHERE tenantId = ?", (tenant_id,)).fetchone() is None:
                self._insert(conn, SigningSecret.new(tenant_id, now))
        return self.live(tenant_id)

    def _insert(self, conn: sqlite3.Connection, secret: SigningSecret) -> None:
        value = kept(secret.tenantId, secret.id, secret.secret, self._keyring)
        conn.execute(
            "INSERT INTO signing_secrets (id, tenantId, secret, keyId, sealed, createdAt) VALUES (?, ?, ?, ?, ?, ?)",
            (secret.id, secret.tenantId, value.secret, value.key_id, value.sealed, to_ms(secret.createdAt)),
        )

    def _seal_in_place(self, conn: sqlite3.Connection) -> None:
        """Seal the secrets kept in the clear (written before the key), in the caller's transaction."""
        if not self._keyring.available:
            return
        rows = conn.execute("SELECT id, tenantId, secret, keyId, sealed FROM signing_secrets WHERE sealed IS NULL")
        upgraded = [(r[0], sealed_in_place(str(r[1]), str(r[0]), _kept(r), self._keyring)) for r in rows.fetchall()]
        if not upgraded:
            return
        (before,) = conn.execute("PRAGMA secure_delete").fetchone()
        conn.execute("PRAGMA secure_delete = ON")  # the clear values' bytes are overwritten, not left in free space
        try:
            for secret_id, value in upgraded:
                assert value is not None  # a key is here and the row was not sealed
                conn.execute(
                    "UPDATE signing_secrets SET secret = '', keyId = ?, sealed = ? WHERE id = ? AND sealed IS NULL",
                    (value.key_id, value.sealed, secret_id),
                )
        finally:
            conn.execute(f"PRAGMA secure_delete = {int(before)}")
        log.info("signing secrets sealed", extra={"action": "signing_secrets_sealed", "count": len(upgraded)})


def _kept(row: sqlite3.Row) -> KeptSecret:
    """The value of a row read as (id, tenantId, secret, keyId, sealed, ...)."""
    key_id, sealed = row[3], row[4]
    return KeptSecret(str(row[2]), None if key_id is None else str(key_id), None if sealed is None else bytes(sealed))
