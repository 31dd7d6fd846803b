"""The MongoDB database's numbered migrations (shared/store/mongo/migrations.py, schema.py): a database written by
the last version before them is brought to the latest and keeps working, replicas starting together all end
there, a database of a later version is refused, and a released migration is never edited."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from bson import ObjectId, json_util
from pymongo import MongoClient
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

from jobsched.backoff import Backoff, backoff_document
from jobsched.limits import Limits, Rate
from shared.keys.base import Role
from shared.keys.manage import issue_key
from shared.model import Outcome, Status, utc_now
from shared.sealing import Keyring
from shared.store.base import SchemaTooNew
from shared.store.browse import JobQuery
from shared.store.claim_limits import ClaimLimits
from shared.store.mongo import MongoDatabase, MongoJobStore, schema
from shared.store.mongo.keys import MongoKeyStore
from shared.store.mongo.migrations import LATEST, MIGRATIONS, attempt_history_in_jobs, backoff_on_jobs
from shared.store.mongo.schema import VERSION_COLLECTION, VERSION_ID, ensure_schema, schema_version
from tests.contract.store_kit import NOT_FINAL_ONES, new, one_in_every_status, reload, result, running, start
from tests.fixtures.databases.write_fixtures import FIXTURE_KEY, T0
from tests.migration_support import announce_backoffs, assert_released_unchanged
from tests.support import backend_beside

Document = dict[str, Any]
FIXTURE = Path(__file__).parents[1] / "fixtures" / "databases" / "mongo-before-migrations.json"
# Written by the last version that kept attempts in executions and attempt_outcomes (schema version 6).
ATTEMPT_RECORDS = FIXTURE.with_name("mongo-attempt-records.json")
REPLICAS = 4
SLOW = Backoff(base_s=30, cap_s=600)  # a type's own backoff, announced before the upgrade
OWN = Backoff(base_s=5, cap_s=60)
# Each released migration's name and the sha256 of its source (inspect.getsource), in MIGRATIONS' order.
RELEASED = [
    ("unique_idempotency_per_tenant", "2897d1a662fa1d87d044561a13010401c69e263f58da142d0900039d930af5d2"),
    ("drop_global_idempotency_index", "07d45ebc335d110defcbc95a4c514817f454e95f16fab73f081445f380091504"),
    ("query_indexes", "6dbf819c24a1363fff912f8376cf6963243a439730c5492395408150cfac5861"),
    ("operator_indexes", "4c1366b2a96e7e8e6f3e2f31ca5a83d8e76bc5b3dc23e1046e378462fd964cef"),
    ("backoff_on_jobs", "c2184efd82005c27339451a48c5e5730dcc1e67c27f2972dc0924b0d7aca08bf"),
    ("leaner_job_indexes", "69c8b0d994a4099d659fc95e08f19fbf298a54711b78e061c8004f019d2c743a"),
    ("attempt_history_in_jobs", "2b96b315d56173d08416ca8ba8efb93bb476a0b963e9ae099b881ef1dc517bb2"),
    ("dependency_indexes", "297134ab07ab2b077427e232937d9285cb94dc5358dcb2c54ca63a5399356b3d"),
    ("workflow_indexes", "0b69bbaae0a25ccce274b27219cfc1b5f50b6557831933ba73ce1b1b06b91095"),
    ("batch_indexes", "ae41bff21015dc4183aeb377c72a58db59a9c6507952b75e658e1bb86353cd39"),
    ("history_minutes", "5f2c578cca33dcf46a0db55bc4e45b9df3c49ed6f0d83a48879e42e260db2b3e"),
    ("counts_by_status", "41348354ad7da15dc17f99ebdc3c48d2a10e3f1d267c51c0f3cd49f987731c16"),
    ("collections_made_up_front", "cbcc78073da9fd8d82e025697f27d1102c0e02201b5904a4b3c79b60073c7d8a"),
]


@pytest.fixture
def scratch(mongo_client: MongoClient[Document], test_id: str) -> Iterator[Callable[[str], Database[Document]]]:
    """Databases of this test's own (`scratch("fresh")`), dropped after it."""
    made: list[str] = []

    def make(role: str) -> Database[Document]:
        made.append(f"t_{test_id}_{role}")
        return mongo_client[made[-1]]

    yield make
    for name in made:
        mongo_client.drop_database(name)


def load_fixture(db: Database[Document], fixture: Path = FIXTURE) -> dict[str, list[Document]]:
    """The database as a version left it (by default the one before numbered migrations): every collection's
    documents, and its indexes made from their dumped specs. Returns the documents by collection."""
    dumped = json_util.loads(fixture.read_text())
    for name, collection in dumped.items():
        db.create_collection(name)
        if collection["documents"]:
            db[name].insert_many([dict(doc) for doc in collection["documents"]])
        for spec in collection["indexes"]:
            if spec["name"] != "_id_":
                options = {option: value for option, value in spec.items() if option != "key"}
                db[name].create_index([(field, direction) for field, direction in spec["key"]], **options)
    return {name: collection["documents"] for name, collection in dumped.items()}


def index_specs(db: Database[Document]) -> dict[str, dict[str, Document]]:
    """Every collection's indexes but `_id_`, by name, as the server lists them (keys in order, options)."""
    specs: dict[str, dict[str, Document]] = {}
    for name in db.list_collection_names():
        found = {
            spec["name"]: {**{k: v for k, v in spec.items() if k not in ("v", "ns")}, "key": list(spec["key"].items())}
            for spec in db[name].list_indexes()
            if spec["name"] != "_id_"
        }
        if found:
            specs[name] = found
    return specs


def without_history(db: Database[Document], collection: str) -> str:
    return canonical(list(db[collection].find({}, {"history": 0}).sort("_id")))


def documents(db: Database[Document], collection: str) -> str:
    return canonical(list(db[collection].find().sort("_id")))


def canonical(docs: list[Document]) -> str:
    return json_util.dumps(docs, json_options=json_util.CANONICAL_JSON_OPTIONS)


def fresh_indexes(mongo_uri: str, db: Database[Document]) -> dict[str, dict[str, Document]]:
    """The indexes an empty database gets."""
    store = MongoJobStore.connect(mongo_uri, db.name)
    try:
        store.ensure_schema()
    finally:
        store.close()
    return index_specs(db)


def test_a_database_from_before_numbered_migrations_is_migrated_and_keeps_working(
    mongo_uri: str, scratch: Callable[[str], Database[Document]]
) -> None:
    old, fresh = scratch("old"), scratch("fresh")
    written = load_fixture(old)
    store = MongoJobStore.connect(mongo_uri, old.name)
    try:
        assert schema_version(store.database) == 0
        store.ensure_schema()
        assert schema_version(store.database) == LATEST
        assert index_specs(old) == fresh_indexes(mongo_uri, fresh)
        for collection, docs in written.items():  # as they were, the jobs' attempts copied into them (migration 7)
            assert without_history(old, collection) == canonical(docs), collection

        backend = backend_beside(store, Keyring(FIXTURE_KEY))
        waiting = store.job_by_key("acme", "waits")
        assert waiting is not None
        assert store.get(waiting.id) == waiting
        template = store.job_by_key("acme", "nightly")
        assert template is not None
        [claimed] = store.claim_due_jobs(T0 + timedelta(hours=1), 10, ["report"])
        assert (claimed.templateId, claimed.status) == (template.id, Status.QUEUED)
        listed = {job.id for job in backend.browser.page("acme", JobQuery())}
        assert listed == {str(doc["_id"]) for doc in written["jobs"] if doc["tenantId"] == "acme"}
        key = backend.open_keys().find("jsk_fixture")
        assert key is not None
        assert key.tenantId == "acme"
        assert backend.credentials.value("acme", "smtp") == "hunter2"
        assert len(backend.signing_secrets.live("acme")) == 1
        assert backend.job_types.limit_overrides() == {"email": Limits(concurrency=4)}
        assert [a.executor for a in backend.job_types.announcements("email")] == ["executor-email-1"]
    finally:
        store.close()


def test_the_unique_index_of_before_per_tenant_keys_is_dropped(
    mongo_uri: str, scratch: Callable[[str], Database[Document]]
) -> None:
    """Migration 2 on a database whose idempotency keys were unique across tenants: a key another tenant uses
    can be taken once migrated."""
    old, fresh = scratch("old"), scratch("fresh")
    global_keys(old)
    store = MongoJobStore.connect(mongo_uri, old.name)
    try:
        with pytest.raises(DuplicateKeyError):  # what the index did before
            old["jobs"].insert_one({"tenantId": "globex", "idempotencyKey": "waits"})
        store.ensure_schema()
        assert index_specs(old) == fresh_indexes(mongo_uri, fresh)
        assert store.create(new("waits", tenantId="globex")).tenantId == "globex"
    finally:
        store.close()


def global_keys(db: Database[Document]) -> None:
    """The fixture as a version before per-tenant idempotency keys left it: one unique index on the key alone."""
    load_fixture(db)
    db["jobs"].drop_index("tenant_idempotency_unique")
    db["jobs"].create_index("idempotencyKey", unique=True, name="idempotencyKey_unique")


def migrate_together(mongo_uri: str, name: str) -> None:
    """REPLICAS processes' worth of connections start on database `name` at the same moment: every one migrates
    it without an error, and it ends at the latest version."""
    replicas = [MongoDatabase.connect(mongo_uri, name) for _ in range(REPLICAS)]
    together = threading.Barrier(REPLICAS)
    failures: list[BaseException] = []

    def start_replica(database: MongoDatabase) -> None:
        together.wait()
        try:
            ensure_schema(database)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=start_replica, args=(database,)) for database in replicas]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        assert schema_version(replicas[0]) == LATEST
    finally:
        for database in replicas:
            database.close()


@pytest.mark.parametrize("start", ["empty", "before-migrations", "global-keys"])
def test_replicas_starting_together_all_migrate_the_database_to_the_latest(
    mongo_uri: str, scratch: Callable[[str], Database[Document]], start: str
) -> None:
    shared, fresh = scratch("shared"), scratch("fresh")
    if start == "before-migrations":
        load_fixture(shared)
    elif start == "global-keys":
        global_keys(shared)
    migrate_together(mongo_uri, shared.name)
    assert index_specs(shared) == fresh_indexes(mongo_uri, fresh)


def test_a_database_of_a_later_version_is_refused_and_left_as_it_is(
    mongo_uri: str, mongo_db: Database[Document]
) -> None:
    later = LATEST + 2
    mongo_db[VERSION_COLLECTION].insert_one({"_id": VERSION_ID, "version": later})
    database = MongoDatabase.connect(mongo_uri, mongo_db.name)
    try:
        expected = f"the database's schema is version {later}; this jobsched knows versions up to {LATEST}: "
        with pytest.raises(SchemaTooNew) as refused:
            MongoJobStore(database).ensure_schema()
        assert str(refused.value).startswith(expected)
        assert "downgrades are not supported" in str(refused.value)
        with pytest.raises(SchemaTooNew):
            MongoKeyStore(database).ensure_schema()  # `jobsched keys` and the API's key cache refuse it too
        assert schema_version(database) == later
        assert index_specs(mongo_db) == {}
    finally:
        database.close()


def test_no_write_of_the_product_makes_a_collection_the_migrations_did_not(
    mongo_uri: str, scratch: Callable[[str], Database[Document]]
) -> None:
    """Every collection is made by ensure_schema, none by a write at run time (migration 13): on DocumentDB a
    write into a missing collection makes it within that write, which once failed an insert."""
    db = scratch("fresh")
    store = MongoJobStore.connect(mongo_uri, db.name)
    try:
        store.ensure_schema()
        made = set(db.list_collection_names())
        backend = backend_beside(store, Keyring(FIXTURE_KEY))
        now = utc_now()
        _, issued = issue_key(backend.open_keys(), "acme", Role.READER, "reads", by="tests")
        backend.open_keys().record_use([issued.prefix], now)
        backend.credentials.set("acme", "smtp", "hunter2", now)
        backend.signing_secrets.add("acme", now)
        backend.job_types.set_limits("email", Limits(concurrency=4), now)
        store.cancel(running(store).id)  # a running job's cancellation is a request to its executor
        store.create_many([new(jobType="paced"), new(jobType="paced", concurrencyKey="k")])
        paced = ClaimLimits(rate=Rate(10, per=1.0), key_rate=Rate(1, per=1.0))
        assert store.claim_due_jobs(utc_now(), 10, {"paced"}, limits={"paced": paced})
        assert set(db.list_collection_names()) == made
        assert {"api_keys", "api_key_usage", "credentials", "signing_secrets", "job_type_limits"} <= made
        assert {"cancel_requests", "rate_limits", "key_rate_limits"} <= made
        assert db["cancel_requests"].count_documents({}) == 1
        assert db["rate_limits"].count_documents({}) == db["key_rate_limits"].count_documents({}) == 1
    finally:
        store.close()


def test_released_migrations_are_never_edited() -> None:
    assert_released_unchanged(MIGRATIONS, RELEASED, "shared/store/mongo/migrations.py")


def store_at_version(mongo_uri: str, db: Database[Document], at: int, monkeypatch: pytest.MonkeyPatch) -> MongoJobStore:
    """A store on a database migrated up to version `at` only, as the jobsched whose last migration it was left
    it."""
    with monkeypatch.context() as patch:
        patch.setattr(schema, "MIGRATIONS", MIGRATIONS[:at])
        patch.setattr(schema, "LATEST", at)
        store = MongoJobStore.connect(mongo_uri, db.name)
        store.ensure_schema()
    assert schema_version(store.database) == at
    return store


def test_an_upgrade_gives_the_jobs_not_final_of_a_type_its_announced_backoff(
    mongo_uri: str, scratch: Callable[[str], Database[Document]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 5 on a database of version 4 (no backoff on jobs; closers looked up the type's), run by replicas
    starting together: the jobs that may still run an attempt, of a type whose latest announcement has a backoff
    of its own, keep being retried with it."""
    db = scratch("v4")
    old = store_at_version(mongo_uri, db, 4, monkeypatch)
    try:
        types, t0 = backend_beside(old).job_types, utc_now()
        announce_backoffs(types, t0, SLOW)
        slow = one_in_every_status(old, "slow")
        claimed = running(old, jobType="slow")
        own = old.create(new(jobType="slow"))  # as an upgraded API, started first, made it: its own stays
        others = [*one_in_every_status(old, "back").values(), old.create(new(jobType="never-announced"))]
    finally:
        old.close()
    assert all("backoff" not in doc for doc in db["jobs"].find())
    db["jobs"].update_one({"_id": ObjectId(claimed.id)}, {"$set": {"status": "claimed"}})  # as earlier versions wrote
    db["jobs"].update_one({"_id": ObjectId(own.id)}, {"$set": {"backoff": backoff_document(OWN)}})
    migrate_together(mongo_uri, db.name)
    store = MongoJobStore.connect(mongo_uri, db.name)
    try:
        backoffs = {name: reload(store, job).backoff for name, job in slow.items()}
        assert backoffs == {name: SLOW if name in NOT_FINAL_ONES else None for name in slow}
        assert (reload(store, claimed).backoff, reload(store, own).backoff) == (SLOW, OWN)
        assert [reload(store, job).backoff for job in others] == [None] * len(others)
        assert {name: reload(store, job).evolve(backoff=None) for name, job in slow.items()} == slow  # nothing else
        migrated = documents(db, "jobs")
        backoff_on_jobs(store.database)  # again: it changes nothing
        assert documents(db, "jobs") == migrated
        retried = store.finish_attempt(reload(store, slow["running"]), result(Outcome.FAILED, "boom"))
        assert retried is not None
        assert retried.scheduledAt == retried.updatedAt + SLOW.delay(1)
    finally:
        store.close()


def test_an_upgrade_to_partial_job_indexes_keeps_every_job_findable(
    mongo_uri: str, scratch: Callable[[str], Database[Document]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 6 on a database of version 5 holding a job in every status, run by replicas starting together:
    the database ends with a new database's indexes (none of those it replaced), and what the scheduler, the
    reaper, retention and the operator look for is found through the partial ones, each job where it was."""
    old, fresh = scratch("old"), scratch("fresh")
    store = store_at_version(mongo_uri, old, 5, monkeypatch)
    try:
        jobs = one_in_every_status(store, "upgraded")
        expired = running(store, jobType="upgraded", lease_until=utc_now() - timedelta(seconds=1))
        due = store.create(new(jobType="upgraded"))
        assert {"claim_order", "finished_age", "expired_attempts"} <= set(old["jobs"].index_information())

        migrate_together(mongo_uri, old.name)
        assert schema_version(store.database) == LATEST
        assert index_specs(old) == fresh_indexes(mongo_uri, fresh)

        assert [j.id for j in store.expired_attempts(utc_now(), 10)] == [expired.id]
        [claimed] = store.claim_due_jobs(utc_now(), 10, {"upgraded"})
        assert claimed.id == due.id
        assert [j.id for j in store.buffered_runs(10)] == [jobs["buffered"].id]
        assert [j.id for j in store.due_templates(utc_now() + timedelta(days=2), 10)] == [jobs["template"].id]
        assert store.release_stale_claims(utc_now() + timedelta(minutes=1)) == 2  # the queued one and the claim
        for status in (Status.COMPLETED, Status.DLQ, Status.CANCELLED):
            assert store.delete_finished(status, utc_now() + timedelta(days=2), 10) == 1, status
            assert store.get(jobs[status.value].id) is None
        assert reload(store, jobs["running"]).status is Status.RUNNING
    finally:
        store.close()


def test_an_upgrade_to_counts_by_status_keeps_the_counts_and_the_lost_wake_ups(
    mongo_uri: str, scratch: Callable[[str], Database[Document]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 12 on a database of version 11 holding a job in every status, run by replicas starting together:
    type_counts and queued_age give way to status_counts, the overview counts the same, and the reaper still
    finds the wake-up left queued too long."""
    old, fresh = scratch("old"), scratch("fresh")
    store = store_at_version(mongo_uri, old, 11, monkeypatch)
    try:
        jobs = one_in_every_status(store, "upgraded")
        assert {"type_counts", "queued_age"} <= set(old["jobs"].index_information())
        browser = backend_beside(store).browser
        before = browser.counts(None, utc_now() - timedelta(hours=1))

        migrate_together(mongo_uri, old.name)
        assert schema_version(store.database) == LATEST
        assert index_specs(old) == fresh_indexes(mongo_uri, fresh)  # type_counts and queued_age gone

        assert browser.counts(None, utc_now() - timedelta(hours=1)) == before
        assert store.release_stale_claims(utc_now() + timedelta(minutes=1)) == 1
        assert reload(store, jobs["queued"]).status is Status.PENDING
    finally:
        store.close()


def test_an_upgrade_moves_every_attempt_record_into_its_job(
    mongo_uri: str, scratch: Callable[[str], Database[Document]]
) -> None:
    """Migration 7 on a database written by the version that kept attempts in `executions` and `attempt_outcomes`,
    run by replicas starting together: every job lists the attempts it listed before (a batched success completed
    from its outcome, a cancelled one, a failed one, an open one), a failed attempt of the last hour is counted
    once, and the jobs go on (an open attempt finishes, a retried job runs again) with their history."""
    db = scratch("v6")
    written = load_fixture(db, ATTEMPT_RECORDS)
    retried = next(d for d in written["jobs"] if d["idempotencyKey"] == "retried")
    recently = utc_now() - timedelta(minutes=10)
    db["attempt_outcomes"].update_one({"_id": f"{retried['_id']}:1"}, {"$set": {"at": recently}})
    migrate_together(mongo_uri, db.name)
    store = MongoJobStore.connect(mongo_uri, db.name)
    try:
        by_key = {key: store.job_by_key("acme", key) for key in ("done", "failing", "cancelled", "retried")}
        by_key.update({key: store.job_by_key("acme", key) for key in ("running", "plain-1", "plain-2")})
        listed = {
            key: [(e.attempt, e.outcome, e.error, e.result, e.durationMs) for e in store.list_executions(job.id)]
            for key, job in by_key.items()
            if job is not None
        }
        assert listed == {
            "done": [(1, Outcome.SUCCEEDED, None, {"sent": True}, 0.0)],
            "failing": [(1, Outcome.FAILED, "SMTP 550", None, 0.0)],
            "cancelled": [(1, Outcome.CANCELLED, None, None, None)],
            "retried": [(1, Outcome.FAILED, "timeout at the gateway", None, 0.0)],
            "running": [(1, Outcome.RUNNING, None, None, None)],
            "plain-1": [(1, Outcome.SUCCEEDED, None, None, 1000.0)],
            "plain-2": [(1, Outcome.SUCCEEDED, None, None, 2000.0)],
        }
        failures = list(db["attempt_failures"].find())
        assert [(f["_id"], f["jobType"], f["tenantId"]) for f in failures] == [(f"{retried['_id']}:1", "sms", "acme")]
        migrated = documents(db, "jobs")
        attempt_history_in_jobs(store.database)  # again: it changes nothing
        assert documents(db, "jobs") == migrated

        running_job = by_key["running"]
        assert running_job is not None
        assert store.finish_attempt(running_job, result(Outcome.SUCCEEDED)) is not None
        [again] = store.claim_due_jobs(utc_now(), 10, {"sms"})
        assert again.idempotencyKey == "retried"
        second = store.finish_attempt(start(store, again, "w2"), result(Outcome.SUCCEEDED))
        assert second is not None
        assert second.status is Status.COMPLETED
        assert [(e.attempt, e.outcome) for e in store.list_executions(again.id)] == [
            (1, Outcome.FAILED),
            (2, Outcome.SUCCEEDED),
        ]
        assert [e.outcome for e in store.list_executions(running_job.id)] == [Outcome.SUCCEEDED]
    finally:
        store.close()
