"""Test harness: real servers, isolated per test.

Servers come from MONGO_URI / KAFKA_BROKERS / ETCD_ENDPOINTS when set (as `make test` and CI do); otherwise
the session starts the local real servers with the scripts in deployments/local/ and stops the ones it
started. Every test gets its own database, topic prefix and etcd key prefix, so tests never see each
other's data (a test of a migrated store gets a database an earlier test of its worker used, emptied first:
tests/migrated_databases.py). Tests under tests/<tier>/ get the <tier> marker. A test that reaches a server
gets the `servers` marker from the fixtures it uses (pytest_collection_modifyitems below), so
`pytest -m "not servers"` needs none: that is `make test-fast`, which runs the SQLite half of every test
parametrized over the stores.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from pymongo import MongoClient
from pymongo.database import Database

from shared.bus.kafka import KafkaBus
from shared.store.mongo import MongoJobStore
from tests.migrated_databases import MigratedDatabases
from tests.support import ServiceProcess, delete_topics

REPO_ROOT = Path(__file__).resolve().parent.parent
LOCAL_SCRIPTS = REPO_ROOT / "deployments" / "local"
TIERS = ("unit", "contract", "integration", "e2e")
# The fixtures that reach a real server; every fixture that talks to one depends on one of them.
SERVER_FIXTURES = frozenset({"mongo_uri", "kafka_brokers", "etcd_endpoints"})
# The fixtures that start from a migrated MongoDB store (the API tests' api_store asks for mongo_store only at run
# time, which a test's fixture names cannot show): their tests' databases come from MigratedDatabases.
MIGRATED_STORE_FIXTURES = frozenset({"mongo_store", "harness", "api_store"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _mark(items)
    _keep_phase(config, items, os.environ.get("TEST_PHASE", ""))


def _keep_phase(config: pytest.Config, items: list[pytest.Item], phase: str) -> None:
    """TEST_PHASE=shared keeps the tests that leave the shared servers running, =exclusive those that stop or
    restart one (tests/run_all.sh runs the first in several processes, then the second alone); unset, all."""
    if phase not in ("shared", "exclusive"):
        return
    keep = [item for item in items if (item.get_closest_marker("exclusive") is not None) == (phase == "exclusive")]
    config.hook.pytest_deselected(items=[item for item in items if item not in keep])
    items[:] = keep


def _mark(items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.path)).relative_to(REPO_ROOT / "tests").parts
        if parts and parts[0] in TIERS:
            item.add_marker(getattr(pytest.mark, parts[0]))
        # fixturenames is the whole closure of the item's fixtures, so a test is marked by the server fixture it
        # reaches through any other (one chosen at run time by a parameter: see _servers_marked).
        if isinstance(item, pytest.Function) and SERVER_FIXTURES.intersection(item.fixturenames):
            item.add_marker(pytest.mark.servers)


@pytest.fixture(autouse=True)
def _servers_marked(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails a test that reached a server without the `servers` marker: a fixture parametrized over backends
    asks for the server's fixture at run time (request.getfixturevalue), which collection cannot see, so that
    parameter carries the marker itself (`pytest.param("mongo", marks=pytest.mark.servers)`), checked here."""
    yield
    reached = SERVER_FIXTURES.intersection(request.fixturenames)
    if reached and request.node.get_closest_marker("servers") is None:
        pytest.fail(
            f"{request.node.nodeid} reached {', '.join(sorted(reached))} without the servers marker: "
            "give the parameter that chose the server marks=pytest.mark.servers",
            pytrace=False,
        )


def _script(server: str, command: str) -> str:
    result = subprocess.run(
        ["bash", str(LOCAL_SCRIPTS / f"{server}.sh"), command], capture_output=True, text=True, check=False
    )
    if result.returncode != 0 and command != "status":
        raise RuntimeError(f"deployments/local/{server}.sh {command} failed:\n{result.stderr[-4000:]}")
    return result.stdout if command != "status" else str(result.returncode)


def _endpoint(server: str, variable: str) -> Iterator[str]:
    """The endpoint from `variable`, else a local server started (and later stopped) for this session."""
    given = os.environ.get(variable)
    if given:
        yield given
        return
    already_running = _script(server, "status") == "0"
    _script(server, "start")
    exports = _script(server, "env")
    value = exports.strip().rpartition(f"{variable}=")[2]
    try:
        yield value
    finally:
        if not already_running:
            _script(server, "stop")


@pytest.fixture(scope="session")
def mongo_uri() -> Iterator[str]:
    yield from _endpoint("ferretdb", "MONGO_URI")


@pytest.fixture(scope="session")
def kafka_brokers() -> Iterator[str]:
    yield from _endpoint("kafka", "KAFKA_BROKERS")


@pytest.fixture(scope="session")
def etcd_endpoints() -> Iterator[str]:
    yield from _endpoint("etcd", "ETCD_ENDPOINTS")


@pytest.fixture
def test_id() -> str:
    """A short id unique to this test, the root of every per-test name."""
    return uuid.uuid4().hex[:10]


@pytest.fixture(scope="session")
def mongo_client(mongo_uri: str) -> Iterator[MongoClient[dict[str, object]]]:
    client: MongoClient[dict[str, object]] = MongoClient(mongo_uri, serverSelectionTimeoutMS=5000, tz_aware=True)
    yield client
    client.close()


@pytest.fixture(scope="session")
def migrated_databases(mongo_uri: str, mongo_client: MongoClient[dict[str, object]]) -> Iterator[MigratedDatabases]:
    def migrate(db: Database[dict[str, object]]) -> None:
        store = MongoJobStore.connect(mongo_uri, db.name)
        try:
            store.ensure_schema()
        finally:
            store.close()

    databases = MigratedDatabases(mongo_client, migrate)
    yield databases
    databases.drop_all()


@pytest.fixture
def mongo_db(
    mongo_client: MongoClient[dict[str, object]], test_id: str, request: pytest.FixtureRequest
) -> Iterator[Database[dict[str, object]]]:
    """The test's own database: empty, or migrated already when the test starts from a migrated store."""
    name = f"t_{test_id}"
    if MIGRATED_STORE_FIXTURES.intersection(request.fixturenames):
        databases: MigratedDatabases = request.getfixturevalue("migrated_databases")
        db = databases.take(name)
        yield db
        databases.give_back(db)
        return
    yield mongo_client[name]
    mongo_client.drop_database(name)


@pytest.fixture
def topic_prefix(test_id: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """The root of the test's topic names; the topics go with the test (after its processes have stopped): a
    broker that keeps the topics of every test run it served runs out of memory after a few thousand."""
    prefix = f"t-{test_id}-"
    yield prefix
    if "kafka_brokers" in request.fixturenames:
        delete_topics(request.getfixturevalue("kafka_brokers"), prefix)


@pytest.fixture
def etcd_prefix(test_id: str) -> str:
    return f"/jobsched-test/{test_id}/"


@pytest.fixture
def mongo_store(mongo_uri: str, mongo_db: Database[dict[str, object]]) -> Iterator[MongoJobStore]:
    store = MongoJobStore.connect(mongo_uri, mongo_db.name)
    store.ensure_schema()
    yield store
    store.close()


@pytest.fixture
def kafka_bus(kafka_brokers: str, topic_prefix: str) -> Iterator[KafkaBus]:
    bus = KafkaBus(kafka_brokers, partitions=2, topic_prefix=topic_prefix)
    yield bus
    bus.close()


@pytest.fixture
def product_env(
    mongo_uri: str,
    mongo_db: Database[dict[str, object]],
    kafka_brokers: str,
    topic_prefix: str,
    etcd_endpoints: str,
    etcd_prefix: str,
) -> dict[str, str]:
    """The environment of a product process isolated to this test's database, topics and election key."""
    return {
        "MONGO_URI": mongo_uri,
        "MONGO_DB": mongo_db.name,
        "KAFKA_BROKERS": kafka_brokers,
        "KAFKA_TOPIC_PREFIX": topic_prefix,
        "KAFKA_PARTITIONS": "2",
        "ETCD_ENDPOINTS": etcd_endpoints,
        "ELECTION_KEY": f"{etcd_prefix}scheduler-leader",
        "SCHEDULER_TICK": "200ms",
    }


class Launch:
    """Starts product processes (`launch("executor", "--type", "noop", name="x", ENV="v")`) with the test's
    environment; the fixture stops every one of them afterwards."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self._env = env
        self._log_dir = log_dir
        self.started: list[ServiceProcess] = []

    def __call__(self, service: str, *args: str, name: str | None = None, **env: str) -> ServiceProcess:
        process = ServiceProcess(
            service, {**self._env, **env}, self._log_dir, name or f"{service}-{len(self.started)}", args=list(args)
        )
        self.started.append(process)
        return process


LOG_LINES_ON_FAILURE = 60
CALL_REPORT = pytest.StashKey[pytest.TestReport]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep the call's report on the item, for fixtures that say more when their test failed."""
    report = yield
    if report.when == "call":
        item.stash[CALL_REPORT] = report
    return report


@pytest.fixture
def launch(product_env: dict[str, str], tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Launch]:
    launcher = Launch(product_env, tmp_path)
    yield launcher
    for process in launcher.started:
        process.stop()
    report = request.node.stash.get(CALL_REPORT, None)
    if report is not None and report.failed:  # the processes' own account, in the failure's report
        for process in launcher.started:
            tail = process.log_text().splitlines()[-LOG_LINES_ON_FAILURE:]
            print(f"--- the last {len(tail)} lines of {process.name}'s log ---", *tail, sep="\n")
