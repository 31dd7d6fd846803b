"""Sealing secrets (shared/sealing.py) and where the key comes from (shared/sealing_keys.py): AES-256-GCM bound to
what a value belongs to, the key's forms and id, the refusals without a key, and the embedded mode's key file."""

from __future__ import annotations

import base64
import stat
import threading
from pathlib import Path

import pytest

from shared.config import ConfigError, Settings
from shared.sealing import (
    KEY_FILE_VARIABLE,
    KEY_VARIABLE,
    Keyring,
    KeyUnavailable,
    Undecryptable,
    key_from_text,
    key_id_of,
    new_key_text,
)
from shared.sealing_keys import configured_keyring, embedded_keyring, generated_key_text, key_file_beside

KEY = bytes(range(32))


def test_a_sealed_value_opens_only_for_what_it_was_sealed_for() -> None:
    keyring = Keyring(KEY)
    sealed = keyring.seal("s3cret", "credential", "acme", "billing")
    assert b"s3cret" not in sealed.blob
    assert sealed.key_id == key_id_of(KEY) == keyring.key_id
    assert keyring.open(sealed, "credential", "acme", "billing") == "s3cret"
    assert keyring.seal("s3cret", "credential", "acme", "billing").blob != sealed.blob  # a fresh nonce each time
    for belongs_to in (
        ("credential", "mallory", "billing"),
        ("credential", "acme", "other"),
        ("signing-secret", "acme", "billing"),
        ("credential", "acme\u0000billing", ""),  # no joining of the parts makes two bindings alike
    ):
        with pytest.raises(Undecryptable):
            keyring.open(sealed, *belongs_to)
    altered = type(sealed)(sealed.key_id, sealed.blob[:-1] + bytes([sealed.blob[-1] ^ 1]))
    with pytest.raises(Undecryptable):
        keyring.open(altered, "credential", "acme", "billing")


def test_another_key_or_none_is_refused_with_the_variable_named() -> None:
    sealed = Keyring(KEY).seal("s3cret", "credential", "acme", "billing")
    with pytest.raises(KeyUnavailable, match=f"not this process's key .*{KEY_VARIABLE}"):
        Keyring(bytes(32)).open(sealed, "credential", "acme", "billing")
    missing = Keyring.missing()
    assert not missing.available
    for attempt in (lambda: missing.seal("x", "a"), lambda: missing.open(sealed, "a"), lambda: missing.key_id):
        with pytest.raises(KeyUnavailable, match=f"{KEY_VARIABLE} \\(or {KEY_FILE_VARIABLE}\\)"):
            attempt()


def test_a_key_is_32_bytes_of_base64_in_either_alphabet_with_or_without_padding() -> None:
    raw = bytes([250] * 16 + [251] * 16)  # encodes with + and / (or - and _)
    standard = base64.b64encode(raw).decode()
    assert "+" in standard or "/" in standard
    for text in (standard, standard.rstrip("="), base64.urlsafe_b64encode(raw).decode(), f"  {standard}\n"):
        assert key_from_text(text, "X") == raw
    for bad in ("", "not base64!", base64.b64encode(bytes(16)).decode(), base64.b64encode(bytes(33)).decode()):
        with pytest.raises(ValueError, match="X is not a key: expected 32 bytes"):
            key_from_text(bad, "X")
    assert len(key_from_text(new_key_text(), "new")) == 32


def test_the_configured_key_from_the_variable_or_its_file(tmp_path: Path) -> None:
    text = new_key_text()
    assert configured_keyring(Settings.from_env({KEY_VARIABLE: text})).key_id == key_id_of(key_from_text(text, ""))
    mounted = tmp_path / "key"
    mounted.write_text(text + "\n")
    from_file = configured_keyring(Settings.from_env({KEY_FILE_VARIABLE: str(mounted)}))
    assert from_file.key_id == key_id_of(key_from_text(text, ""))
    assert not configured_keyring(Settings.from_env({})).available  # none: the process starts, and refuses later
    assert text not in repr(Settings.from_env({KEY_VARIABLE: text}))


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({KEY_VARIABLE: "short"}, f"{KEY_VARIABLE} is not a key"),
        ({KEY_VARIABLE: new_key_text(), KEY_FILE_VARIABLE: "/x"}, "not both"),
        ({KEY_FILE_VARIABLE: "/no/such/file"}, f"{KEY_FILE_VARIABLE}=/no/such/file: No such file"),
    ],
)
def test_a_key_given_but_unusable_stops_the_start(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        configured_keyring(Settings.from_env(env))


def test_the_embedded_mode_makes_its_key_beside_the_database_once_readable_by_its_owner(tmp_path: Path) -> None:
    database = tmp_path / "jobs.db"
    first = embedded_keyring(Settings.from_env({}), database)
    key_file = key_file_beside(database)
    assert key_file == tmp_path / "jobs.db.secrets-key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    again = embedded_keyring(Settings.from_env({}), database)
    assert again.key_id == first.key_id  # the same key at the next start: what it sealed still opens
    assert [p.name for p in tmp_path.iterdir()] == ["jobs.db.secrets-key"]  # no draft left behind
    given = new_key_text()
    assert embedded_keyring(Settings.from_env({KEY_VARIABLE: given}), database).key_id != first.key_id


def test_processes_making_the_key_at_once_end_with_the_same_one(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db.secrets-key"
    found: list[str] = []
    start = threading.Barrier(8)

    def make() -> None:
        start.wait()
        found.append(generated_key_text(path))

    threads = [threading.Thread(target=make) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(found)) == 1
    assert found[0] == path.read_text()


def test_a_damaged_key_file_stops_the_embedded_start(tmp_path: Path) -> None:
    database = tmp_path / "jobs.db"
    key_file_beside(database).write_text("damaged\n")
    with pytest.raises(ConfigError, match="restore it from its backup"):
        embedded_keyring(Settings.from_env({}), database)
