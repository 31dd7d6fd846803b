"""The API tests run on both stores: MongoDB (FerretDB) and the embedded SQLite store of `jobsched dev`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from services.api.app import create_app
from shared.store.base import JobStore
from shared.store.sqlite import SqliteJobStore


@pytest.fixture(params=["mongo", "sqlite"])
def api_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JobStore]:
    if request.param == "mongo":
        yield request.getfixturevalue("mongo_store")
        return
    store = SqliteJobStore(tmp_path / "api.db")
    store.ensure_schema()
    yield store
    store.close()


@pytest.fixture
def api(api_store: JobStore) -> Iterator[TestClient]:
    with TestClient(create_app(api_store), raise_server_exceptions=False) as client:
        yield client
