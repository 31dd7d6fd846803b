"""loadtest.write_races, at a tiny size: the store's own concurrent writes meet no server error, and replicas
upgrading a database at once all succeed (shared/store/deadlocks.py)."""

from __future__ import annotations

import pytest

from loadtest.write_races import main


def test_write_races_run_and_the_stores_writes_meet_no_error(
    mongo_uri: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MONGO_URI", mongo_uri)
    main(["--jobs", "60", "--threads", "3", "--trials", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert "store: 60 of 60 jobs taken, 0 more than once, 0 errors" in lines
    assert any(line.startswith("sorted-find-and-modify: 60 of 60 jobs taken, 0 more than once") for line in lines)
    assert "schema-upgrade, ensure_schema: 6 of 6 replicas succeeded, 0 errors" in lines
