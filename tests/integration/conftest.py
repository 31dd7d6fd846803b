from __future__ import annotations

from collections.abc import Iterator

import pytest
from pymongo.database import Database
from starlette.testclient import TestClient

from services.api.app import create_app
from shared.store.mongo import MongoJobStore


@pytest.fixture
def mongo_store(mongo_uri: str, mongo_db: Database[dict[str, object]]) -> Iterator[MongoJobStore]:
    store = MongoJobStore.connect(mongo_uri, mongo_db.name)
    store.ensure_schema()
    yield store
    store.close()


@pytest.fixture
def api(mongo_store: MongoJobStore) -> Iterator[TestClient]:
    with TestClient(create_app(mongo_store), raise_server_exceptions=False) as client:
        yield client


