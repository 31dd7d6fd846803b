"""A resource's routes are module-level functions that find what they use on their request (ApiContext): one
module's routes serve, and are tested, without the rest of the API; and the apps of one process do not share
what authentication wraps."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from starlette.applications import Starlette
from starlette.testclient import TestClient

from services.api.app import create_app
from services.api.auth.api_auth import api_auth
from services.api.context import ApiContext
from services.api.http.errors import exception_handlers
from services.api.http.store_slots import StoreSlots
from services.api.routes import job_types, jobs
from services.api.schema_readiness import SchemaReadiness
from services.api.store_ping import StorePing
from shared.config import Settings
from shared.handlers.builtin import builtin_types
from shared.job_types.known import KnownTypes
from shared.model import format_time, utc_now
from shared.schedules.engine import ScheduleEngine
from shared.store.sqlite import SqliteJobStore
from shared.store.sqlite.keys import SqliteKeyStore
from tests.support import LOCAL, backend_beside


def only(store: SqliteJobStore, *modules: object) -> Starlette:
    schema = SchemaReadiness(store)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        schema.start()
        yield
        await schema.stop()

    app = Starlette(
        routes=[route for module in modules for route in module.ROUTES],  # type: ignore[attr-defined]
        exception_handlers=exception_handlers(),
        lifespan=lifespan,
    )
    app.state.api = ApiContext(
        store=store,
        browser=backend_beside(store).browser,
        known=KnownTypes(backend_beside(store).job_types, local=builtin_types(demo=False)),
        schema=schema,
        slots=StoreSlots(write_slots=4, read_slots=4, wait_s=1.0),
        schedules=ScheduleEngine(store),
        store_ping=StorePing(store.ping),
        openapi=dict,
        signing_secrets=backend_beside(store).signing_secrets,
        credentials=backend_beside(store).credentials,
    )
    return app


def test_the_job_routes_serve_alone(tmp_path: Path) -> None:
    store = SqliteJobStore(tmp_path / "alone.db")
    try:
        with TestClient(only(store, jobs, job_types), base_url=LOCAL) as client:
            body = {"idempotencyKey": "a-1", "tenantId": "t", "jobType": "noop", "scheduledAt": format_time(utc_now())}
            created = client.post("/jobs", json=body)
            assert created.status_code == 201, created.text
            assert client.get(f"/jobs/{created.json()['id']}").json()["idempotencyKey"] == "a-1"
            refused = client.post("/jobs", json={**body, "idempotencyKey": "a-2", "jobType": "flaky"})
            assert refused.status_code == 400  # the demo types were left out of this context's known types
            assert {t["name"] for t in client.get("/job-types").json()} == {"log-message", "noop"}
            assert client.get("/schedules/preview").status_code == 404  # only the modules given are served
    finally:
        store.close()


def test_an_app_with_authentication_leaves_the_next_apps_routes_open(tmp_path: Path) -> None:
    store = SqliteJobStore(tmp_path / "two-apps.db")
    store.ensure_schema()
    keys = SqliteKeyStore(store.path)
    keys.ensure_schema()
    try:
        guarded = create_app(backend_beside(store), api_auth(Settings(auth="required"), lambda: keys))
        with TestClient(guarded, base_url=LOCAL) as client:
            assert client.get("/jobs?tenantId=t").status_code == 401
        with TestClient(create_app(backend_beside(store)), base_url=LOCAL) as client:
            assert client.get("/jobs?tenantId=t").status_code == 200
    finally:
        store.close()
