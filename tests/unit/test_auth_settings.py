"""Which authentication the API runs with: AUTH, the bind address, the bootstrap key and the rate limit."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from services.api.auth.api_auth import ApiAuth, api_auth
from shared.config import ConfigError, Settings
from shared.keys import tokens
from shared.keys.base import KeyStore
from shared.store.sqlite.keys import SqliteKeyStore


def auth_for(tmp_path: Path, **env: str) -> ApiAuth | None:
    def open_keys() -> KeyStore:
        return SqliteKeyStore(tmp_path / "keys.db")

    return api_auth(Settings.from_env(env), open_keys)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_without_auth_runs_the_reference_contract(tmp_path: Path, host: str) -> None:
    assert auth_for(tmp_path, API_HOST=host) is None


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "api.example.com"])
def test_a_non_loopback_bind_without_auth_refuses_to_start(tmp_path: Path, host: str) -> None:
    with pytest.raises(ConfigError, match=r"not a loopback address: set AUTH=required .* or AUTH=off"):
        auth_for(tmp_path, API_HOST=host)


def test_explicit_auth_off_on_a_non_loopback_bind_starts_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="jobsched.api"):
        assert auth_for(tmp_path, API_HOST="0.0.0.0", AUTH="off") is None
    [warning] = [r for r in caplog.records if getattr(r, "action", None) == "auth_off_exposed"]
    assert "every tenant" in warning.getMessage()


def test_auth_required_takes_the_rate_limit_settings(tmp_path: Path) -> None:
    limited = auth_for(tmp_path, AUTH="required", API_HOST="0.0.0.0")
    assert limited is not None
    assert limited.buckets is not None
    unlimited = auth_for(tmp_path, AUTH="required", RATE_LIMIT="0")
    assert unlimited is not None
    assert unlimited.buckets is None


def test_the_bootstrap_key_comes_from_the_variable_or_a_file(tmp_path: Path) -> None:
    key, _ = tokens.new_key()
    secret = tmp_path / "admin-key"
    secret.write_text(key + "\n")
    assert auth_for(tmp_path, AUTH="required", AUTH_BOOTSTRAP_KEY=key) is not None
    assert auth_for(tmp_path, AUTH="required", AUTH_BOOTSTRAP_KEY_FILE=str(secret)) is not None
    with pytest.raises(ConfigError, match="not both"):
        auth_for(tmp_path, AUTH="required", AUTH_BOOTSTRAP_KEY=key, AUTH_BOOTSTRAP_KEY_FILE=str(secret))
    with pytest.raises(ConfigError, match=r"AUTH_BOOTSTRAP_KEY_FILE=.*missing"):
        auth_for(tmp_path, AUTH="required", AUTH_BOOTSTRAP_KEY_FILE=str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="AUTH_BOOTSTRAP_KEY is not an API key"):
        auth_for(tmp_path, AUTH="required", AUTH_BOOTSTRAP_KEY="hunter2")


def test_settings_never_print_the_bootstrap_key() -> None:
    key, _ = tokens.new_key()
    assert key not in repr(Settings.from_env({"AUTH_BOOTSTRAP_KEY": key}))


@pytest.mark.parametrize("raw", ["yes", "REQUIRED", "none"])
def test_auth_accepts_only_required_or_off(raw: str) -> None:
    with pytest.raises(ConfigError, match="AUTH="):
        Settings.from_env({"AUTH": raw})
