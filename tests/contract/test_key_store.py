"""The KeyStore contract (shared/keys/base.py docstrings), run on SQLite and on MongoDB."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path

import pytest

from shared.keys import tokens
from shared.keys.base import ApiKey, KeyStore, PrefixTaken, Role
from shared.keys.manage import install_bootstrap_key, issue_key, revoke_key
from shared.model import utc_now
from shared.store.base import StoreUnavailable
from shared.store.mongo.keys import MongoKeyStore
from shared.store.sqlite.keys import SqliteKeyStore
from tests.contract.conftest import BACKENDS
from tests.contract.store_kit import together
from tests.support import free_port


@pytest.fixture(params=BACKENDS)
def open_keys(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[partial[KeyStore]]:
    """Opens key stores on one shared database (each call: another replica's connection)."""
    opened: list[KeyStore] = []

    def open_one() -> KeyStore:
        made: KeyStore
        if request.param == "sqlite":
            made = SqliteKeyStore(tmp_path / "keys.db")
        else:
            made = MongoKeyStore.connect(request.getfixturevalue("mongo_uri"), request.getfixturevalue("mongo_db").name)
        opened.append(made)
        return made

    yield partial(open_one)
    for made in opened:
        made.close()


@pytest.fixture
def keys(open_keys: partial[KeyStore]) -> KeyStore:
    made = open_keys()
    made.ensure_schema()
    made.ensure_schema()  # idempotent
    return made


def record(
    prefix: str,
    tenant: str = "tenant-a",
    role: Role = Role.WRITER,
    *,
    name: str | None = None,
    at: datetime | None = None,
) -> ApiKey:
    return ApiKey(prefix, tenant, role, tokens.digest(f"key-{prefix}"), at or utc_now(), name)


def test_insert_find_and_list_newest_first(keys: KeyStore) -> None:
    now = utc_now()
    older = record("a00000000001", at=now - timedelta(minutes=1), name="first")
    newer = record("a00000000002", tenant="tenant-b", role=Role.ADMIN, at=now)
    keys.insert(older)
    keys.insert(newer)
    assert keys.find("a00000000001") == older
    assert keys.find("ffffffffffff") is None
    assert keys.list_keys() == [newer, older]
    assert keys.list_keys("tenant-a") == [older]
    assert keys.list_keys("tenant-c") == []


def test_a_prefix_has_one_owner_even_under_races(open_keys: partial[KeyStore]) -> None:
    stores = [open_keys(), open_keys()]
    stores[0].ensure_schema()
    outcomes = together([partial(stores[i % 2].insert, record("b00000000001", tenant=f"t{i}")) for i in range(8)])
    assert sum(o is None for o in outcomes) == 1, outcomes
    assert all(isinstance(o, PrefixTaken) for o in outcomes if o is not None), outcomes
    [winner] = [i for i, o in enumerate(outcomes) if o is None]
    found = stores[1].find("b00000000001")
    assert found is not None
    assert found.tenantId == f"t{winner}"


def test_revoke_keeps_the_first_time_and_unknown_is_none(keys: KeyStore) -> None:
    keys.insert(record("c00000000001"))
    first = utc_now()
    revoked = keys.revoke("c00000000001", first)
    assert revoked is not None
    assert revoked.revokedAt == first
    again = keys.revoke("c00000000001", first + timedelta(hours=1))
    assert again is not None
    assert again.revokedAt == first
    assert keys.find("c00000000001") == revoked
    assert keys.revoke("ffffffffffff", first) is None


def test_record_use_moves_last_used_forward_only_and_never_unrevokes(keys: KeyStore) -> None:
    keys.insert(record("d00000000001"))
    keys.insert(record("d00000000002"))
    now = utc_now()
    keys.record_use({"d00000000001", "d00000000002", "ffffffffffff"}, now)
    keys.record_use(["d00000000001"], now - timedelta(minutes=5))  # a replica reporting late
    keys.record_use(["d00000000001", "e00000000001"], now - timedelta(minutes=1))  # a known key and a new one
    keys.record_use([], now)
    revoked = keys.revoke("d00000000002", now)
    keys.record_use(["d00000000002"], now + timedelta(seconds=1))
    found = {k.prefix: k for k in keys.list_keys()}
    assert found["d00000000001"].lastUsedAt == now
    assert found["d00000000002"].lastUsedAt == now + timedelta(seconds=1)
    assert revoked is not None
    assert found["d00000000002"].revokedAt == revoked.revokedAt == now
    assert "ffffffffffff" not in found
    assert keys.find("d00000000001") == found["d00000000001"]


def test_issue_key_stores_only_the_digest_and_revoke_key_revokes(keys: KeyStore) -> None:
    key, issued = issue_key(keys, "tenant-a", Role.READER, "ci", by="test")
    assert tokens.prefix_of(key) == issued.prefix
    assert len(key) > 40
    stored = keys.find(issued.prefix)
    assert stored == issued
    assert key not in repr(stored)
    assert tokens.matches(key, issued.keyHash)
    assert not tokens.matches(key + "x", issued.keyHash)
    revoked = revoke_key(keys, issued.prefix, by="test")
    assert revoked is not None
    assert revoked.revokedAt is not None
    assert revoke_key(keys, "ffffffffffff", by="test") is None


def test_the_bootstrap_key_is_installed_once_and_stays_revoked(keys: KeyStore) -> None:
    key, prefix = tokens.new_key()
    installed = install_bootstrap_key(keys, key, "ops")
    assert (installed.prefix, installed.tenantId, installed.role) == (prefix, "ops", Role.ADMIN)
    assert install_bootstrap_key(keys, key, "ops") == installed
    keys.revoke(prefix, utc_now())
    again = install_bootstrap_key(keys, key, "ops")
    assert again.revokedAt is not None
    impostor = f"jsk_{prefix}_{'A' * 43}"  # the prefix of an existing key with another secret
    with pytest.raises(PrefixTaken):
        install_bootstrap_key(keys, impostor, "ops")
    with pytest.raises(ValueError, match="not an API key"):
        install_bootstrap_key(keys, "letmein", "ops")


@pytest.mark.parametrize("backend", ["sqlite", "mongo"])
def test_an_unreachable_store_is_store_unavailable(backend: str, tmp_path: Path) -> None:
    store: KeyStore
    if backend == "sqlite":
        store = SqliteKeyStore(tmp_path / "no-such-directory" / "keys.db")
    else:
        store = MongoKeyStore.connect(f"mongodb://127.0.0.1:{free_port()}/?directConnection=true", "x", timeout_ms=300)
    for call in (store.ensure_schema, store.list_keys, partial(store.find, "a00000000001")):
        with pytest.raises(StoreUnavailable):
            call()
    store.close()


def test_a_sqlite_key_file_is_created_readable_by_its_owner_only(tmp_path: Path) -> None:
    """`jobsched keys create --sqlite FILE` on a new file: the key digests are as private as the jobs."""
    store = SqliteKeyStore(tmp_path / "keys.db")
    store.ensure_schema()
    assert (tmp_path / "keys.db").stat().st_mode & 0o777 == 0o600
