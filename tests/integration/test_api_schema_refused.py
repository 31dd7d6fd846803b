"""An API on a database that a later jobsched migrated: it stops trying to apply its schema, /readyz says why
and what to do, writes answer 503 at once, and the process stays alive (/healthz)."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo.database import Database
from starlette.testclient import TestClient

from services.api.app import create_app
from shared.store.mongo import MongoJobStore
from shared.store.mongo.migrations import LATEST
from shared.store.mongo.schema import VERSION_COLLECTION, VERSION_ID
from tests.integration.test_api import job_body
from tests.support import LOCAL, backend_beside, wait_until


def test_an_api_on_a_database_of_a_later_version_says_so_and_stops_retrying(
    mongo_uri: str, mongo_db: Database[dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    mongo_db[VERSION_COLLECTION].insert_one({"_id": VERSION_ID, "version": LATEST + 1})
    store = MongoJobStore.connect(mongo_uri, mongo_db.name)
    app = create_app(backend_beside(store))
    try:
        with TestClient(app, raise_server_exceptions=False, base_url=LOCAL) as client:
            schema = app.state.api.schema
            wait_until(lambda: schema.refused, 10, "the schema to be refused")
            ready = client.get("/readyz")
            assert ready.status_code == 503
            assert ready.json()["error"].startswith(
                f"the database's schema is version {LATEST + 1}; this jobsched knows versions up to {LATEST}"
            )
            assert client.post("/jobs", json=job_body()).status_code == 503
            assert client.get("/healthz").status_code == 200
        refusals = [r for r in caplog.records if getattr(r, "action", None) == "schema_refused"]
        assert len(refusals) == 1
        assert not [r for r in caplog.records if getattr(r, "action", None) == "schema_retry"]
    finally:
        store.close()
