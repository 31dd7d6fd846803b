"""Where the embedded mode keeps its file: `jobsched standalone` only at an absolute path, `jobsched dev` in the
working directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.embedded.commands import SERVICE_DB, dev_database, service_database
from shared.config import ConfigError

pytestmark = pytest.mark.unit


def test_the_service_takes_the_flag_then_the_variable_then_systemds_state_directory() -> None:
    environ = {"JOBSCHED_DB": "/srv/env.db", "STATE_DIRECTORY": "/var/lib/js"}
    assert service_database("/srv/flag.db", environ) == Path("/srv/flag.db")
    assert service_database(None, environ) == Path("/srv/env.db")
    assert service_database(None, {"STATE_DIRECTORY": "/var/lib/js:/var/lib/other"}) == Path("/var/lib/js/jobsched.db")
    assert service_database(None, {}) == SERVICE_DB
    assert SERVICE_DB.is_absolute()


@pytest.mark.parametrize("given", ["jobs.db", "./jobs.db", "data/jobs.db", "~/jobs.db"])
def test_the_service_refuses_a_relative_path(given: str) -> None:
    with pytest.raises(ConfigError, match="must be absolute"):
        service_database(given, {})
    with pytest.raises(ConfigError, match="must be absolute"):
        service_database(None, {"JOBSCHED_DB": given})


def test_dev_resolves_its_file_in_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert dev_database({}) == tmp_path / "jobsched.db"
    assert dev_database({"JOBSCHED_DB": "x/y.db"}) == tmp_path / "x" / "y.db"
