"""The credentials' contract, on every store: a tenant's own, set (made or replaced), listed without values,
deleted; at most MAX_PER_TENANT (decided atomically, also when many set at once); kept sealed, so that no byte of
the database holds a value, and a sealed value moved to another tenant or name does not open. And the signing
secrets under the same key: sealed when a key is given, kept as before without one, and the clear ones a
database holds from before sealed when a process with the key first uses them."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from functools import partial
from pathlib import Path

import pytest

from shared.http_jobs.credentials import (
    MAX_PER_TENANT,
    BadCredential,
    Credentials,
    NoSuchCredential,
    TooManyCredentials,
    ValueTooLarge,
)
from shared.model import utc_now
from shared.sealing import KEY_VARIABLE, Keyring, KeyUnavailable, Undecryptable, new_key_text
from shared.sealing import key_from_text as key_of
from shared.store.base import JobStore
from shared.store.sqlite import SqliteJobStore
from tests.contract.conftest import Harness
from tests.contract.store_kit import together
from tests.secret_traces import assert_absent, mongo_bytes, sqlite_bytes
from tests.support import backend_beside

KEYRING = Keyring(key_of(new_key_text(), "test"))
TOKEN = "sk_live_0123456789abcdefTOKEN"


@pytest.fixture
def credentials(store: JobStore) -> Credentials:
    return backend_beside(store, KEYRING).credentials


def stored(harness: Harness) -> bytes:
    """Every byte the store under test keeps (the harness's class is pytest's own import of conftest: by name)."""
    if harness.backend == "sqlite":
        return sqlite_bytes(harness.path)  # type: ignore[attr-defined]
    return mongo_bytes(harness.db)  # type: ignore[attr-defined]


def test_a_credential_is_set_replaced_listed_without_its_value_and_deleted(credentials: Credentials) -> None:
    assert credentials.store.listed("acme") == []
    first_at = utc_now()
    made, created = credentials.set("acme", "billing-token", TOKEN, first_at)
    assert created
    assert (made.name, made.tenantId, made.createdAt, made.updatedAt) == (
        "billing-token",
        "acme",
        made.createdAt,
        made.createdAt,
    )
    assert abs(made.createdAt - first_at) < timedelta(milliseconds=1)
    assert credentials.value("acme", "billing-token") == TOKEN
    replaced, created = credentials.set("acme", "billing-token", TOKEN + "-2", first_at + timedelta(seconds=5))
    assert not created
    assert replaced.createdAt == made.createdAt  # a rotation keeps when it was made
    assert replaced.updatedAt > made.updatedAt
    assert credentials.value("acme", "billing-token") == TOKEN + "-2"
    credentials.set("acme", "another", "x", utc_now())
    [a, b] = credentials.store.listed("acme")
    assert [a.name, b.name] == ["another", "billing-token"]  # by name
    assert "value" not in a.to_wire()
    assert TOKEN not in repr(b.to_wire())
    assert credentials.store.missing("acme", {"billing-token", "gone", "another"}) == {"gone"}
    assert credentials.store.remove("acme", "billing-token") is True
    assert credentials.store.remove("acme", "billing-token") is False
    with pytest.raises(NoSuchCredential, match="no credential named 'billing-token'"):
        credentials.value("acme", "billing-token")
    assert [c.name for c in credentials.store.listed("acme")] == ["another"]


def test_a_tenants_credentials_are_its_own(credentials: Credentials) -> None:
    credentials.set("acme", "billing-token", TOKEN, utc_now())
    assert credentials.store.listed("other") == []
    assert credentials.store.missing("other", {"billing-token"}) == {"billing-token"}
    assert credentials.store.remove("other", "billing-token") is False
    with pytest.raises(NoSuchCredential):
        credentials.value("other", "billing-token")
    credentials.set("other", "billing-token", "theirs", utc_now())  # the same name, another tenant's
    assert (credentials.value("acme", "billing-token"), credentials.value("other", "billing-token")) == (
        TOKEN,
        "theirs",
    )


def test_names_and_values_are_bounded(credentials: Credentials) -> None:
    for name in ("", "-leading", "has space", "a/b", "é", "x" * 129):
        with pytest.raises(BadCredential, match="name"):
            credentials.set("acme", name, "v", utc_now())
    for value in ("", "line\nbreak", "tab\there", "naïve"):
        with pytest.raises(BadCredential, match="value"):
            credentials.set("acme", "ok", value, utc_now())
    with pytest.raises(ValueTooLarge):
        credentials.set("acme", "ok", "x" * (8 * 1024 + 1), utc_now())
    credentials.set("acme", "ok", "x" * (8 * 1024), utc_now())
    assert credentials.store.listed("acme")[0].name == "ok"


def test_a_tenant_has_at_most_the_limit_even_when_many_set_at_once(credentials: Credentials) -> None:
    for index in range(MAX_PER_TENANT - 3):
        credentials.set("full", f"c{index}", "v", utc_now())
    answers = together([partial(credentials.set, "full", f"race{i}", "v", utc_now()) for i in range(8)])
    assert sum(1 for a in answers if not isinstance(a, BaseException)) == 3
    assert all(isinstance(a, TooManyCredentials) for a in answers if isinstance(a, BaseException))
    assert len(credentials.store.listed("full")) == MAX_PER_TENANT
    credentials.set("full", "c0", "rotated", utc_now())  # replacing one is no new one
    assert credentials.value("full", "c0") == "rotated"
    with pytest.raises(TooManyCredentials):
        credentials.set("full", "one-more", "v", utc_now())
    assert credentials.store.listed("other") == []  # another tenant's count is its own


def test_setting_one_name_at_once_makes_it_once(credentials: Credentials) -> None:
    answers = together([partial(credentials.set, "acme", "same", f"v{i}", utc_now()) for i in range(6)])
    assert not [a for a in answers if isinstance(a, BaseException)]
    assert sum(1 for a in answers if not isinstance(a, BaseException) and a[1]) == 1  # one made, the rest replaced
    assert [c.name for c in credentials.store.listed("acme")] == ["same"]


def test_no_byte_of_the_store_holds_a_value(harness: Harness, credentials: Credentials) -> None:
    credentials.set("acme", "billing-token", TOKEN, utc_now())
    credentials.set("acme", "billing-token", TOKEN + "-rotated", utc_now())
    credentials.set("acme", "removed", TOKEN + "-removed", utc_now())
    credentials.store.remove("acme", "removed")
    data = stored(harness)
    assert b"billing-token" in data  # the name is kept, readable: the search looks in the right place
    for value in (TOKEN, TOKEN + "-rotated", TOKEN + "-removed"):
        assert_absent(value, data, f"the {harness.backend} store")


def test_a_sealed_value_moved_to_another_tenant_or_name_does_not_open(credentials: Credentials) -> None:
    credentials.set("acme", "billing-token", TOKEN, utc_now())
    sealed = credentials.store.sealed("acme", "billing-token")
    assert sealed is not None
    credentials.store.put("mallory", "billing-token", sealed, utc_now())  # another tenant, the same name
    credentials.store.put("acme", "other-name", sealed, utc_now())  # the same tenant, another name
    for tenant, name in (("mallory", "billing-token"), ("acme", "other-name")):
        with pytest.raises(Undecryptable):
            credentials.value(tenant, name)
    assert credentials.value("acme", "billing-token") == TOKEN


def test_without_the_key_nothing_is_stored_or_opened_and_the_error_names_the_variable(
    store: JobStore, credentials: Credentials
) -> None:
    credentials.set("acme", "billing-token", TOKEN, utc_now())
    keyless = backend_beside(store).credentials
    with pytest.raises(KeyUnavailable, match=KEY_VARIABLE):
        keyless.set("acme", "new", TOKEN, utc_now())
    with pytest.raises(KeyUnavailable, match=KEY_VARIABLE):
        keyless.value("acme", "billing-token")
    assert [c.name for c in keyless.store.listed("acme")] == ["billing-token"]  # names need no key
    other_key = backend_beside(store, Keyring(key_of(new_key_text(), "test"))).credentials
    with pytest.raises(KeyUnavailable, match="sealed with key"):
        other_key.value("acme", "billing-token")


# --- signing secrets under the same key ----------------------------------------------------------------------


def test_signing_secrets_are_kept_sealed_with_a_key(harness: Harness, store: JobStore) -> None:
    secrets = backend_beside(store, KEYRING).signing_secrets
    made = secrets.add("acme", utc_now())
    [first] = secrets.first("newcomer", utc_now())
    assert [s.secret for s in secrets.live("acme")] == [made.secret]
    data = stored(harness)
    for secret in (made.secret, first.secret):
        assert_absent(secret, data, f"the {harness.backend} store")
    with pytest.raises(KeyUnavailable, match=KEY_VARIABLE):  # a process without the key cannot sign with them
        backend_beside(store).signing_secrets.live("acme")


def test_signing_secrets_written_without_a_key_are_read_then_sealed_by_the_first_process_with_one(
    harness: Harness, store: JobStore
) -> None:
    before = backend_beside(store).signing_secrets  # as a version before the key wrote them
    old = before.add("acme", utc_now())
    [older] = before.first("other", utc_now())
    assert old.secret.encode() in stored(harness)  # in the clear, as before
    keyed = backend_beside(harness.open(), KEYRING).signing_secrets  # a process started with the key
    assert [s.secret for s in keyed.live("acme")] == [old.secret]  # the same secret: receivers keep verifying
    assert [s.secret for s in keyed.live("other")] == [older.secret]
    new = keyed.add("acme", utc_now())
    assert [s.id for s in keyed.live("acme")] == [old.id, new.id]
    if harness.backend == "sqlite":
        harness.close_all()  # the last connection checkpoints the WAL into the file
        data = harness.path.read_bytes()  # type: ignore[attr-defined]
    else:
        data = stored(harness)
    for secret in (old.secret, older.secret, new.secret):
        assert_absent(secret, data, f"the {harness.backend} store after the upgrade")


def test_a_sqlite_file_from_before_the_key_gains_the_sealed_columns_and_loses_the_clear_values(
    tmp_path: Path,
) -> None:
    path = tmp_path / "before.db"
    with sqlite3.connect(path) as conn:  # the table as the version before the key made it
        conn.execute(
            "CREATE TABLE signing_secrets (id TEXT PRIMARY KEY, tenantId TEXT NOT NULL, secret TEXT NOT NULL, "
            "createdAt INTEGER NOT NULL)"
        )
        conn.execute("INSERT INTO signing_secrets VALUES ('ss_old', 'acme', 'whsec_from_before', 0)")
    conn.close()
    store = SqliteJobStore(path)
    store.ensure_schema()
    secrets = backend_beside(store, KEYRING).signing_secrets
    assert [(s.id, s.secret) for s in secrets.live("acme")] == [("ss_old", "whsec_from_before")]
    assert len(secrets.first("acme", utc_now())) == 1  # it has one: none is made
    store.close()
    assert_absent("whsec_from_before", path.read_bytes(), "the upgraded file")
