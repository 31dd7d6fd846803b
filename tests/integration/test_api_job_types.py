"""Job types across processes, as the API sees them: types announced in the store by executors it never
imported, JOB_TYPES, the built-ins; GET /job-types; the type's default attempt budget. On both stores."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from starlette.testclient import TestClient

from jobsched.backoff import Backoff
from jobsched.type_defaults import TypeDefaults
from services.api.app import create_app
from shared.handlers.builtin import builtin_types
from shared.job_types.announcements import JobTypeInfo, JobTypeRegistry
from shared.job_types.known import KnownTypes
from shared.model import format_time, utc_now
from shared.store.base import JobStore
from tests.integration.test_api import job_body
from tests.support import LOCAL, backend_beside, wait_until

BUILTIN_TYPES = builtin_types(demo=True)  # what the binaries serve by default

BEAT = timedelta(seconds=30)


class CountingRegistry:
    """The store's real registry, counting its reads (to show requests never read it)."""

    def __init__(self, inner: JobTypeRegistry) -> None:
        self.inner = inner
        self.reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def job_types(self, now: Any, seen_since: Any) -> list[JobTypeInfo]:
        self.reads += 1
        return self.inner.job_types(now, seen_since)


@pytest.fixture
def types(api_store: JobStore) -> CountingRegistry:
    return CountingRegistry(backend_beside(api_store).job_types)


@pytest.fixture
def client(api_store: JobStore, types: CountingRegistry) -> Iterator[TestClient]:
    known = KnownTypes(types, local=BUILTIN_TYPES, configured=["fax"])
    with TestClient(
        create_app(backend_beside(api_store), known_types=known), raise_server_exceptions=False, base_url=LOCAL
    ) as made:
        yield made


def body(job_type: str, key: str, **fields: Any) -> dict[str, Any]:
    return job_body(**{"idempotencyKey": key, "jobType": job_type, "payload": {}, "maxAttempts": None, **fields})


def test_a_type_announced_by_an_executor_is_accepted_by_an_api_that_never_imported_it(
    client: TestClient, types: CountingRegistry
) -> None:
    refused = client.post("/jobs", json=body("send-email", "before"))
    assert refused.status_code == 400
    assert "unknown jobType 'send-email'" in refused.json()["error"]
    assert "known types: fax, flaky, log-message, noop, slow" in refused.json()["error"]
    now = utc_now()
    defaults = TypeDefaults(max_attempts=7, backoff=Backoff(base_s=2, cap_s=60))
    types.inner.announce("exec-1", {"send-email": defaults}, now, now + BEAT)
    wait_until(
        lambda: client.post("/jobs", json=body("send-email", "after")).status_code == 201,
        15,
        "the announced type to be accepted",
    )
    accepted = client.get("/jobs", params={"tenantId": "tenant-a"}).json()[0]
    assert accepted["idempotencyKey"] == "after"
    assert accepted["maxAttempts"] == 7  # the type's default budget
    own = client.post("/jobs", json=body("send-email", "own", maxAttempts=2))
    assert own.json()["maxAttempts"] == 2  # the job's own wins
    assert "send-email" in client.post("/jobs", json=body("nope", "x")).json()["error"]


def test_configured_and_builtin_types_are_accepted_without_any_executor(client: TestClient) -> None:
    assert client.post("/jobs", json=body("fax", "configured")).status_code == 201
    created = client.post("/jobs", json=body("noop", "builtin"))
    assert (created.status_code, created.json()["maxAttempts"]) == (201, 3)


def test_requests_do_not_read_the_registry(client: TestClient, types: CountingRegistry) -> None:
    now = utc_now()
    types.inner.announce("exec-1", {"resize": TypeDefaults()}, now, now + BEAT)
    wait_until(lambda: client.post("/jobs", json=body("resize", "first")).status_code == 201, 15, "resize accepted")
    before = types.reads
    for i in range(40):
        accepted = client.post("/jobs", json=body("resize", f"k-{i}"))
        assert accepted.status_code == 201, accepted.text
        refused = client.post("/jobs", json=body("unknown-type", f"u-{i}"))
        assert refused.status_code == 400, refused.text
    # Only the background refresh reads it (every 2 s), whatever the number of requests.
    assert types.reads - before <= 5


class SlowFirstRead:
    """The store's real registry, whose first read answers only when the test lets it (what it read is of the
    moment it started)."""

    def __init__(self, inner: JobTypeRegistry) -> None:
        self.inner = inner
        self.first_started = threading.Event()
        self.release_first = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def job_types(self, now: Any, seen_since: Any) -> list[JobTypeInfo]:
        read = self.inner.job_types(now, seen_since)
        if not self.first_started.is_set():
            self.first_started.set()
            assert self.release_first.wait(30), "the test never released the first read"
        return read


def test_a_read_that_started_before_an_announcement_does_not_undo_a_newer_one(api_store: JobStore) -> None:
    registry = SlowFirstRead(backend_beside(api_store).job_types)
    known = KnownTypes(registry, local=BUILTIN_TYPES)

    async def overlapping_reads() -> tuple[bool, bool]:
        stale = asyncio.create_task(known.accepts("resize"))  # the first request: the first read, before it
        assert await asyncio.to_thread(registry.first_started.wait, 30)
        now = utc_now()
        registry.inner.announce("exec-1", {"resize": TypeDefaults()}, now, now + BEAT)
        listed = {entry["name"] for entry in await known.listing()}  # GET /job-types: a newer read, done first
        assert "resize" in listed
        registry.release_first.set()
        return await stale, await known.accepts("resize")

    assert asyncio.run(overlapping_reads()) == (True, True)


def test_job_types_lists_every_accepted_type_as_a_bare_array(client: TestClient, types: CountingRegistry) -> None:
    now = utc_now()
    types.inner.announce("exec-1", {"send-email": TypeDefaults()}, now, now + BEAT)
    types.inner.announce("exec-2", {"send-email": TypeDefaults(), "noop": TypeDefaults()}, now, now + BEAT)
    types.inner.announce("exec-gone", {"old": TypeDefaults()}, now - BEAT, now - BEAT / 2)
    listing = client.get("/job-types")
    assert listing.status_code == 200
    by_name = {entry["name"]: entry for entry in listing.json()}
    assert [entry["name"] for entry in listing.json()] == sorted(by_name)
    assert set(by_name) == {"fax", "flaky", "log-message", "noop", "old", "send-email", "slow"}
    no_limits = {"limits": None, "limitsSource": None}
    assert by_name["send-email"] == {"name": "send-email", "executors": 2, "lastSeenAt": format_time(now), **no_limits}
    assert (by_name["noop"]["executors"], by_name["old"]["executors"]) == (1, 0)
    assert by_name["fax"] == {"name": "fax", "executors": 0, "lastSeenAt": None, **no_limits}


def test_a_template_of_an_announced_type_gets_the_types_budget_on_creation_and_on_a_null_patch(
    client: TestClient, types: CountingRegistry
) -> None:
    now = utc_now()
    types.inner.announce("exec-1", {"report": TypeDefaults(max_attempts=6)}, now, now + BEAT)
    wait_until(lambda: client.post("/jobs", json=body("report", "probe")).status_code == 201, 15, "the announced type")
    template = body("report", "nightly", cron="0 2 * * *")
    del template["scheduledAt"]
    created = client.post("/jobs", json=template).json()
    assert created["maxAttempts"] == 6
    assert client.patch(f"/jobs/{created['id']}", json={"maxAttempts": 2}).json()["maxAttempts"] == 2
    # null means the default, as on creation: the type's, not the global 3
    assert client.patch(f"/jobs/{created['id']}", json={"maxAttempts": None}).json()["maxAttempts"] == 6


def test_every_way_in_stores_the_types_backoff_on_the_job_and_a_budget_patch_refreshes_it(
    client: TestClient, types: CountingRegistry, api_store: JobStore
) -> None:
    """POST /jobs, its batch and a schedules file store the type's announced backoff on the job, which the body never
    shows; a template keeps it until a PATCH sets its maxAttempts, which takes the type's of then (as its budget)."""
    slow, faster = Backoff(base_s=30, cap_s=600), Backoff(base_s=1, cap_s=10)
    now = utc_now()
    types.inner.announce("exec-1", {"report": TypeDefaults(backoff=slow)}, now, now + BEAT)

    def stored_backoff(job_id: str) -> Backoff | None:
        job = api_store.get(job_id)
        assert job is not None
        return job.backoff

    def created(key: str) -> dict[str, Any]:
        answer = client.post("/jobs", json=body("report", key))
        assert answer.status_code == 201, answer.text
        return dict(answer.json())

    wait_until(lambda: client.post("/jobs", json=body("report", "probe")).status_code == 201, 15, "the announced type")
    one_off = created("one-off")
    [in_batch] = client.post("/jobs/batch", json={"jobs": [body("report", "in-a-batch")]}).json()["results"]
    template = body("report", "nightly", cron="0 2 * * *")
    del template["scheduledAt"]
    nightly = client.post("/jobs", json=template).json()
    from_file = body("report", "from-a-file", cron="0 4 * * *", tenantId=None)
    del from_file["scheduledAt"]
    assert client.post("/schedules/apply", json={"tenantId": "tenant-a", "schedules": [from_file]}).status_code == 200
    applied = client.get("/jobs", params={"tenantId": "tenant-a", "templates": "true"}).json()
    [file_template] = [t for t in applied if t["idempotencyKey"] == "from-a-file"]
    made = [one_off, in_batch, nightly, file_template]
    assert [stored_backoff(job["id"]) for job in made] == [slow] * len(made)
    assert all("backoff" not in job for job in (one_off, nightly, file_template))

    later = utc_now()
    types.inner.announce("exec-1", {"report": TypeDefaults(backoff=faster)}, later, later + BEAT)
    wait_until(lambda: stored_backoff(created(f"after-{utc_now().timestamp()}")["id"]) == faster, 15, "the new one")
    assert stored_backoff(one_off["id"]) == slow  # what a job was created with stays
    assert client.patch(f"/jobs/{nightly['id']}", json={"priority": 3}).status_code == 200
    assert stored_backoff(nightly["id"]) == slow  # a patch that leaves the budget leaves the backoff
    patched = client.patch(f"/jobs/{nightly['id']}", json={"maxAttempts": None})
    assert (patched.status_code, patched.json()["maxAttempts"]) == (200, 3)
    assert "backoff" not in patched.json()
    assert stored_backoff(nightly["id"]) == faster


def test_the_overview_lists_the_types_the_api_accepts_for_the_consoles_filters(
    client: TestClient, types: CountingRegistry
) -> None:

    now = utc_now()
    types.inner.announce("exec-1", {"send-email": TypeDefaults()}, now, now + BEAT)
    wait_until(
        lambda: "send-email" in client.get("/overview").json()["jobTypes"],
        15,
        "the announced type in the overview",
    )
    listed = client.get("/overview").json()["jobTypes"]
    assert {"fax", "noop", "send-email"} <= set(listed)  # configured, built-in, announced
    assert listed == sorted(listed)
