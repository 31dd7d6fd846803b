from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from services.api.app import create_app
from shared.store.mongo import MongoJobStore


@pytest.fixture
def api(mongo_store: MongoJobStore) -> Iterator[TestClient]:
    with TestClient(create_app(mongo_store), raise_server_exceptions=False) as client:
        yield client
