"""Opening a backend from its URL (shared/backends.py): the one way every binary and command opens its store."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from shared.backends import open_backend, tool_backend
from shared.config import ConfigError, Settings
from shared.store.sqlite import SqliteJobStore
from shared.store.sqlite.browse import SqliteBrowser
from shared.store.sqlite.job_types import SqliteJobTypes
from shared.store.sqlite.keys import SqliteKeyStore
from tests.support import REPO_ROOT


def test_a_sqlite_url_opens_the_file_with_its_parts(tmp_path: Path) -> None:
    backend = open_backend(f"sqlite://{tmp_path}/jobs.db")
    try:
        assert isinstance(backend.jobs, SqliteJobStore)
        assert backend.jobs.path == str(tmp_path / "jobs.db")
        assert isinstance(backend.job_types, SqliteJobTypes)
        assert isinstance(backend.browser, SqliteBrowser)
        keys = backend.open_keys()
        assert isinstance(keys, SqliteKeyStore)
        assert keys.path == backend.jobs.path  # the keys live in the jobs' file
        assert backend.url == f"sqlite://{tmp_path}/jobs.db"
    finally:
        backend.close()


def test_a_mongodb_url_asks_nothing_of_the_server_until_used_and_hides_its_password() -> None:
    backend = open_backend("mongodb://app:s3cret@127.0.0.1:1/?directConnection=true", database="tenant_jobs")
    try:
        assert "s3cret" not in backend.url
        assert "app:***@127.0.0.1:1" in backend.url
        assert "tenant_jobs" in backend.url
    finally:
        backend.close()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite://relative.db", "a SQLite URL names an absolute path"),
        ("postgres://u:hunter2@db/jobs", "a store URL is sqlite:///absolute/path/to/file.db or mongodb://"),
        ("/var/lib/jobs.db", "a store URL is sqlite:///absolute/path/to/file.db or mongodb://"),
    ],
)
def test_what_is_not_a_store_url_is_a_clear_configuration_error(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        open_backend(url)
    assert "hunter2" not in str(refused.value)


def test_the_embedded_mode_does_not_load_the_mongodb_driver(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom shared.backends import open_backend\n"
        f"b = open_backend('sqlite://{tmp_path}/x.db'); b.jobs.ensure_schema(); b.close()\n"
        "assert 'pymongo' not in sys.modules, 'pymongo was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_command_takes_a_url_or_a_file_not_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    relative = tool_backend(None, "tool.db", Settings())
    try:
        assert relative.url == f"sqlite://{tmp_path}/tool.db"  # a command's path is the working directory's
    finally:
        relative.close()
    with pytest.raises(ConfigError, match="not both"):
        tool_backend(f"sqlite://{tmp_path}/a.db", "b.db", Settings())
