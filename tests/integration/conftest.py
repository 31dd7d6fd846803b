"""The API tests run on both stores (MongoDB on FerretDB, and the embedded SQLite store of `jobsched dev`) and
in both authentication modes: AUTH=off (the open contract, tenantId self-declared) and AUTH=required, where
the test client sends a writer key of tenant-a, the tenant the tests' jobs belong to."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from services.api.app import create_app
from services.api.auth.api_auth import api_auth
from shared.config import Settings
from shared.keys.base import KeyStore, Role
from shared.keys.manage import issue_key
from shared.store.base import JobStore
from shared.store.sqlite import SqliteJobStore
from tests.support import LOCAL, backend_beside

MakeApp = Callable[..., Starlette]


@pytest.fixture(params=[pytest.param("mongo", marks=pytest.mark.servers), "sqlite"])
def api_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JobStore]:
    if request.param == "mongo":
        yield request.getfixturevalue("mongo_store")
        return
    store = SqliteJobStore(tmp_path / "api.db")
    store.ensure_schema()
    yield store
    store.close()


@pytest.fixture(params=["off", "required"])
def auth_mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def keys_beside(store: JobStore) -> KeyStore:
    """A key store on the job store's own database, as the API's entry points open it."""
    return backend_beside(store).open_keys()


@pytest.fixture
def api_keys(api_store: JobStore) -> KeyStore:
    keys = keys_beside(api_store)
    keys.ensure_schema()
    return keys  # shares the job store's connections, closed with it


@pytest.fixture
def make_app(api_store: JobStore, auth_mode: str, api_keys: KeyStore) -> MakeApp:
    """create_app in this test's mode; `store` (and the key store beside it) and AUTH settings can be given."""

    def make(store: JobStore | None = None, **env: str) -> Starlette:
        store = store or api_store
        if auth_mode == "off":
            return create_app(backend_beside(store))
        keys = api_keys if store is api_store else keys_beside(store)
        return create_app(backend_beside(store), api_auth(Settings.from_env({"AUTH": "required", **env}), lambda: keys))

    return make


@pytest.fixture
def api_headers(auth_mode: str, api_keys: KeyStore) -> dict[str, str]:
    if auth_mode == "off":
        return {}
    key, _ = issue_key(api_keys, "tenant-a", Role.WRITER, "tests", by="tests")
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def api(make_app: MakeApp, api_headers: dict[str, str]) -> Iterator[TestClient]:
    with TestClient(make_app(), raise_server_exceptions=False, headers=api_headers, base_url=LOCAL) as client:
        yield client


@pytest.fixture
def servers(mongo_uri: str, kafka_brokers: str, etcd_endpoints: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The servers in the environment, as `python -m loadtest.bench` reads them."""
    monkeypatch.setenv("MONGO_URI", mongo_uri)
    monkeypatch.setenv("KAFKA_BROKERS", kafka_brokers)
    monkeypatch.setenv("ETCD_ENDPOINTS", etcd_endpoints)
