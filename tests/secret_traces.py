"""Looking for a secret where it must not be: every byte a store keeps (the SQLite file with its WAL, every
document of every collection of a MongoDB database), answers, logs. A secret counts as found in any of the forms
a careless path would leave it in: as it is, in base64 (standard or URL-safe) or in hex."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import bson
from pymongo.database import Database


def forms(secret: str) -> list[bytes]:
    raw = secret.encode("utf-8")
    return [
        raw,
        base64.b64encode(raw).rstrip(b"="),
        base64.urlsafe_b64encode(raw).rstrip(b"="),
        raw.hex().encode("ascii"),
    ]


def assert_absent(secret: str, haystack: bytes | str, where: str) -> None:
    data = haystack.encode("utf-8") if isinstance(haystack, str) else haystack
    found = [form for form in forms(secret) if form in data]
    assert not found, f"the secret is in {where} (as {found[0][:12]!r}...)"


def sqlite_bytes(database: Path) -> bytes:
    """The file and whatever of it is not checkpointed yet (its WAL)."""
    parts = [database, Path(f"{database}-wal"), Path(f"{database}-shm")]
    return b"".join(part.read_bytes() for part in parts if part.exists())


def mongo_bytes(db: Database[Any]) -> bytes:
    """Every document of every collection of `db`, as BSON (strings as UTF-8, binaries as they are)."""
    chunks = [bson.encode(doc) for name in db.list_collection_names() for doc in db[name].find()]
    assert chunks, f"database {db.name} holds nothing: the search would prove nothing"
    return b"".join(chunks)
