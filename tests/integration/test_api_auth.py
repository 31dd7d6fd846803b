"""AUTH=required on both stores: each role against each route, tenant isolation (cross-tenant reads and writes,
sequential id guessing), revocation reaching every replica, per-tenant idempotency, the per-key rate limit,
the constant-time comparison, audit logs, and the 401/403 details."""

from __future__ import annotations

import asyncio
import hmac
import logging
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx2 as httpx
import pytest
from bson import ObjectId
from starlette.testclient import TestClient

from services.api.app import create_app
from services.api.auth.api_auth import api_auth
from shared import metrics
from shared.config import Settings
from shared.keys.base import KeyStore, Role
from shared.keys.manage import issue_key
from shared.model import Outcome, utc_now
from shared.store.base import AttemptResult, AttemptStart, JobStore
from tests.integration.test_api import job_body
from tests.support import LOCAL, backend_beside, start_one, tenant_jobs, wait_until

PAST = "2020-01-01T00:00:00Z"


@dataclass
class Secured:
    """An API with AUTH=required over the test's store, and a way to mint keys and clients."""

    store: JobStore
    keys: KeyStore
    env: dict[str, str]

    def key(self, tenant: str = "tenant-a", role: Role = Role.WRITER) -> str:
        return issue_key(self.keys, tenant, role, f"{tenant}-{role.value}", by="tests")[0]

    def app(self, **env: str) -> Any:
        settings = Settings.from_env({"AUTH": "required", **self.env, **env})
        return create_app(backend_beside(self.store), api_auth(settings, lambda: self.keys))

    @contextmanager
    def client(self, key: str | None = None, **env: str) -> Iterator[TestClient]:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        with TestClient(self.app(**env), raise_server_exceptions=False, headers=headers, base_url=LOCAL) as client:
            yield client


@pytest.fixture
def secured(api_store: JobStore, api_keys: KeyStore) -> Secured:
    return Secured(api_store, api_keys, {"AUTH_REFRESH": "200ms"})


def dead_lettered(store: JobStore, tenant: str, key: str) -> str:
    """A job of `tenant` in the DLQ (so that retry has something to re-drive); claims every due job."""
    store.create(job_from(tenant, key))
    [queued] = [j for j in store.claim_due_jobs(utc_now(), 100, {"log-message"}) if j.idempotencyKey == key]
    running = start_one(store, AttemptStart(queued.id, queued.jobType, "w", utc_now() + timedelta(minutes=5)))
    now = utc_now()
    store.finish_attempt(running, AttemptResult(Outcome.FAILED, startedAt=now, finishedAt=now, error="boom"))
    return running.id


def job_from(tenant: str, key: str) -> Any:
    from shared.job_requests import JobRequest

    body = job_body(idempotencyKey=key, tenantId=tenant, scheduledAt=PAST, maxAttempts=1)
    return JobRequest.model_validate(body).to_new_job(utc_now())


# --- each role against each route --------------------------------------------------------------------------

LIMITS = "/job-types/log-message/limits"
# (method, path template, status when the role allows it). {job} is a pending job of tenant-a, {dlq} one of
# tenant-a in the DLQ, {key} the prefix of a key to revoke.
ROUTES = [
    ("POST", "/jobs", 201),
    ("GET", "/jobs", 200),
    ("GET", "/jobs/{job}", 200),
    ("GET", "/jobs/{job}/executions", 200),
    ("DELETE", "/jobs/{job}", 200),
    ("POST", "/jobs/{dlq}/retry", 200),
    ("POST", "/api-keys", 201),
    ("GET", "/api-keys", 200),
    ("DELETE", "/api-keys/{key}", 200),
    ("GET", "/healthz", 200),
    ("GET", "/readyz", 200),
    ("GET", "/openapi.json", 200),
    ("GET", "/docs", 200),
    ("GET", "/session", 200),
    ("GET", "/overview", 200),
    ("GET", "/history", 200),
    ("GET", "/dlq", 200),
    ("POST", "/dlq/redrive", 200),
    ("GET", "/ui/", 200),
    ("GET", LIMITS, 200),
    ("PUT", LIMITS, 200),
    ("DELETE", LIMITS, 200),
    ("GET", "/signing-secrets", 200),
    ("POST", "/signing-secrets", 201),
    ("DELETE", "/signing-secrets/{secret}", 200),
]
NEEDS = {
    "/healthz": None,
    "/readyz": None,
    "/openapi.json": None,
    "/docs": None,
    "/ui/": None,
    "/api-keys": Role.ADMIN,
    "/api-keys/{key}": Role.ADMIN,
    # A job type's limits bind every tenant: only an admin changes them; any key reads them.
    ("PUT", LIMITS): Role.ADMIN,
    ("DELETE", LIMITS): Role.ADMIN,
    # A signing secret lets its holder sign a tenant's requests: a writer key, even to read it.
    "/signing-secrets": Role.WRITER,
    "/signing-secrets/{secret}": Role.WRITER,
}


def expected(method: str, path: str, allowed: int, role: Role | None) -> int:
    needs = NEEDS.get((method, path), NEEDS.get(path, Role.READER if method == "GET" else Role.WRITER))
    if needs is None:
        return allowed
    if role is None:
        return 401
    return allowed if role.includes(needs) else 403


@pytest.mark.parametrize("role", [None, Role.READER, Role.WRITER, Role.ADMIN], ids=lambda r: r or "no-key")
@pytest.mark.parametrize(("method", "path", "allowed"), ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_each_role_against_each_route(
    secured: Secured, role: Role | None, method: str, path: str, allowed: int
) -> None:
    dlq = dead_lettered(secured.store, "tenant-a", "failed-one")
    job = secured.store.create(job_from("tenant-a", "pending-one"))
    target = issue_key(secured.keys, "tenant-c", Role.READER, "to revoke", by="tests")[1].prefix
    secret = backend_beside(secured.store).signing_secrets.add("tenant-a", utc_now()).id
    url = path.format(job=job.id, dlq=dlq, key=target, secret=secret)
    bodies = {
        "/jobs": job_body(idempotencyKey="new-one"),
        "/api-keys": {"tenantId": "tenant-c", "role": "reader"},
        "/dlq/redrive": {"jobIds": [dlq]},
        LIMITS: {"concurrency": 3},
        "/signing-secrets": {},  # the key's tenant
    }
    with secured.client(secured.key("tenant-a", role) if role else None) as api:
        wait_until(lambda: api.get("/readyz").status_code == 200, 10, "readiness (public: no key needed)")
        response = api.request(method, url, json=bodies.get(path) if method in ("POST", "PUT") else None)
    assert response.status_code == expected(method, path, allowed, role), response.text
    if response.status_code in (401, 403):
        assert response.json()["error"]
    if response.status_code == 401:
        assert response.headers["WWW-Authenticate"].startswith("Bearer")


# --- tenant isolation --------------------------------------------------------------------------------------


def test_another_tenants_job_is_404_on_every_route_and_stays_untouched(secured: Secured) -> None:
    theirs_dlq = dead_lettered(secured.store, "tenant-a", "a-dlq")
    mine = secured.store.create(job_from("tenant-a", "a-job"))
    unknown = str(ObjectId())
    with secured.client(secured.key("tenant-b")) as other:
        for job_id in (mine.id, theirs_dlq):
            for method, url in (
                ("GET", f"/jobs/{job_id}"),
                ("GET", f"/jobs/{job_id}/executions"),
                ("DELETE", f"/jobs/{job_id}"),
                ("POST", f"/jobs/{job_id}/retry"),
            ):
                response = other.request(method, url)
                never_existed = other.request(method, url.replace(job_id, unknown))
                assert response.status_code == 404, (method, url, response.text)
                assert response.json() == {"error": f"job {job_id} not found"}
                assert never_existed.json() == {"error": f"job {unknown} not found"}
        assert other.get("/jobs").json() == []  # its own tenant: nothing
    assert secured.store.get(mine.id) == mine
    dlq_job = secured.store.get(theirs_dlq)
    assert dlq_job is not None
    assert dlq_job.status.value == "dlq"


def test_naming_another_tenant_in_a_query_or_body_is_403_and_writes_nothing(secured: Secured) -> None:
    with secured.client(secured.key("tenant-b")) as other:
        listed = other.get("/jobs", params={"tenantId": "tenant-a"})
        created = other.post("/jobs", json=job_body(tenantId="tenant-a"))
        both = other.get("/jobs", params=[("tenantId", "tenant-b"), ("tenantId", "tenant-a")])
    for response in (listed, created, both):
        assert response.status_code == 403
        assert "tenant-b" in response.json()["error"]
    assert tenant_jobs(secured.store, "tenant-a", None, 10) == []


def test_a_tenants_signing_secrets_are_its_own(secured: Secured) -> None:
    theirs = backend_beside(secured.store).signing_secrets.add("tenant-a", utc_now())
    with secured.client(secured.key("tenant-b", Role.WRITER)) as other:
        assert other.get("/signing-secrets", params={"tenantId": "tenant-a"}).status_code == 403
        assert other.get("/signing-secrets").json() == []  # its own: none yet
        assert other.delete(f"/signing-secrets/{theirs.id}").status_code == 404  # not one of its own
        assert other.post("/signing-secrets", json={"tenantId": "tenant-a"}).status_code == 403
        made = other.post("/signing-secrets", json={})
        assert (made.status_code, made.json()["tenantId"]) == (201, "tenant-b")
    assert [s.id for s in backend_beside(secured.store).signing_secrets.live("tenant-a")] == [theirs.id]


def test_an_omitted_tenant_is_the_keys_and_an_admin_may_name_any(secured: Secured) -> None:
    with secured.client(secured.key("tenant-b")) as writer:
        created = writer.post("/jobs", json=job_body(tenantId=None, payload={}))
        assert created.status_code == 201
        assert created.json()["tenantId"] == "tenant-b"
        assert [j["id"] for j in writer.get("/jobs").json()] == [created.json()["id"]]
    with secured.client(secured.key("ops", Role.ADMIN)) as admin:
        for_a = admin.post("/jobs", json=job_body(tenantId="tenant-a"))
        assert for_a.status_code == 201
        assert admin.get(f"/jobs/{created.json()['id']}").status_code == 200
        assert [j["id"] for j in admin.get("/jobs", params={"tenantId": "tenant-a"}).json()] == [for_a.json()["id"]]
        assert admin.delete(f"/jobs/{for_a.json()['id']}").json()["status"] == "cancelled"


@pytest.mark.parametrize("auth", ["off", "required"])
def test_sequential_id_guessing_finds_only_the_callers_own_jobs(secured: Secured, auth: str) -> None:
    """ObjectIds made one after another differ in their last bytes by small steps: from one's own job id, a
    few guesses reach the jobs created just after it. With AUTH=off that finds the other tenant's jobs (the
    reported leak); with AUTH=required every guess is a 404."""
    own_key = secured.key("tenant-b")
    app = secured.app() if auth == "required" else create_app(backend_beside(secured.store))
    headers = {"Authorization": f"Bearer {own_key}"}
    with TestClient(app, raise_server_exceptions=False, headers=headers, base_url=LOCAL) as api:
        own = api.post("/jobs", json=job_body(idempotencyKey="mine", tenantId="tenant-b")).json()["id"]
        theirs = {secured.store.create(job_from("tenant-a", f"theirs-{i}")).id for i in range(10)}
        # An ObjectId is a 4-byte second, 5 bytes fixed per process and a 3-byte counter: the guesses step the
        # counter on from one's own, in its second and the next two (the clock may tick while the jobs are made).
        second, rest = divmod(int(own, 16), 1 << 64)
        guesses = [f"{(second + tick) << 64 | rest + step:024x}" for tick in range(3) for step in range(1, 100)]
        found = {g for g in guesses if api.get(f"/jobs/{g}").status_code == 200}
    if auth == "off":
        assert found == theirs, "the guesses should reach the jobs created right after (the control)"
    else:
        assert found == set()


def test_per_tenant_idempotency_through_the_api(secured: Secured) -> None:
    with secured.client(secured.key("tenant-a")) as a, secured.client(secured.key("tenant-b")) as b:
        assert a.post("/jobs", json=job_body(idempotencyKey="same")).status_code == 201
        assert b.post("/jobs", json=job_body(idempotencyKey="same", tenantId="tenant-b")).status_code == 201
        duplicate = a.post("/jobs", json=job_body(idempotencyKey="same"))
        assert duplicate.status_code == 409
        assert b.post("/jobs", json=job_body(idempotencyKey="same", tenantId="tenant-b")).status_code == 409

    async def race() -> list[httpx.Response]:
        app = secured.app()
        keys = {"tenant-a": secured.key("tenant-a"), "tenant-b": secured.key("tenant-b")}
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
            return await asyncio.gather(
                *(
                    client.post(
                        "/jobs",
                        json=job_body(idempotencyKey="raced", tenantId=tenant),
                        headers={"Authorization": f"Bearer {keys[tenant]}"},
                    )
                    for tenant in ["tenant-a", "tenant-b"] * 16
                )
            )

    codes = sorted(r.status_code for r in asyncio.run(race()))
    assert codes == [201, 201] + [409] * 30


# --- keys: revocation, bootstrap, management ---------------------------------------------------------------


def test_a_revoked_key_is_refused_by_every_replica_within_seconds(secured: Secured) -> None:
    key = secured.key("tenant-a")
    admin = secured.key("ops", Role.ADMIN)
    with secured.client(key) as replica_1, secured.client(key) as replica_2:
        assert replica_1.get("/jobs").status_code == 200
        assert replica_2.get("/jobs").status_code == 200
        with secured.client(admin) as management:
            prefix = key.split("_")[1]
            revoked = management.delete(f"/api-keys/{prefix}")
            assert revoked.status_code == 200
            assert revoked.json()["revokedAt"]
        for replica in (replica_1, replica_2):  # each reloads the keys every AUTH_REFRESH (200 ms here)

            def refused(replica: TestClient = replica) -> bool:
                return replica.get("/jobs").status_code == 401

            wait_until(refused, 10, "the revoked key to be refused")
            assert replica.get("/jobs").json() == {"error": "invalid API key"}


def test_keys_created_over_http_work_are_listed_without_secrets_and_record_their_use(secured: Secured) -> None:
    with secured.client(secured.key("ops", Role.ADMIN)) as admin:
        created = admin.post("/api-keys", json={"tenantId": "tenant-z", "role": "reader", "name": "dashboard"})
        assert created.status_code == 201
        new_key = created.json()["key"]
        assert created.json()["prefix"] == new_key.split("_")[1]
        wait_until(
            lambda: admin.get("/jobs", headers={"Authorization": f"Bearer {new_key}"}).status_code == 200,
            10,
            "the new key",
        )
        listed = wait_until(
            lambda: [k for k in admin.get("/api-keys", params={"tenantId": "tenant-z"}).json() if "lastUsedAt" in k],
            10,
            "the key's use to be recorded",
        )
        assert [(k["prefix"], k["role"], k["name"]) for k in listed] == [
            (created.json()["prefix"], "reader", "dashboard")
        ]
        assert new_key not in admin.get("/api-keys").text
        assert "keyHash" not in admin.get("/api-keys").text
        for bad in ({"tenantId": "t", "role": "root"}, {"role": "reader"}, {"tenantId": "t", "role": "reader", "x": 1}):
            assert admin.post("/api-keys", json=bad).status_code == 400
        assert admin.delete("/api-keys/ffffffffffff").status_code == 404


def test_the_bootstrap_admin_key_works_from_the_first_request(secured: Secured) -> None:
    from shared.keys import tokens

    bootstrap, _ = tokens.new_key()
    with secured.client(bootstrap, AUTH_BOOTSTRAP_KEY=bootstrap) as admin:
        created = admin.post("/api-keys", json={"tenantId": "tenant-a", "role": "writer"})
        assert created.status_code == 201
    with secured.client(created.json()["key"]) as writer:
        assert writer.post("/jobs", json=job_body()).status_code == 201


def test_an_unreachable_key_store_is_503_not_an_open_door(secured: Secured) -> None:
    from shared.store.sqlite.keys import SqliteKeyStore

    broken = Secured(secured.store, SqliteKeyStore("/nonexistent/dir/keys.db"), secured.env)
    with broken.client("jsk_000000000000_" + "A" * 43) as api:
        response = api.get("/jobs")
        assert response.status_code == 503
        assert response.json()["error"]
        assert api.get("/healthz").status_code == 200


# --- rate limit, constant time, errors, audit ----------------------------------------------------------------


def test_each_key_has_its_own_token_bucket_and_429_says_when_to_retry(secured: Secured) -> None:
    key, other = secured.key("tenant-a"), secured.key("tenant-a")
    before = metrics.API_RATE_LIMITED.labels("tenant-a")._value.get()
    with secured.client(key, RATE_LIMIT="1", RATE_LIMIT_BURST="2") as api:
        # A burst of 2, then one request a second: within a quick run of requests one is refused.
        responses = [api.get("/jobs") for _ in range(20)]
        assert [r.status_code for r in responses[:2]] == [200, 200]
        limited = next(r for r in responses if r.status_code == 429)
        assert api.get("/jobs", headers={"Authorization": f"Bearer {other}"}).status_code == 200
    assert int(limited.headers["Retry-After"]) >= 1
    assert limited.json() == {"error": "rate limit of this API key exceeded"}
    assert metrics.API_RATE_LIMITED.labels("tenant-a")._value.get() > before


def test_an_unknown_prefix_and_a_wrong_secret_cost_the_same_comparison(
    secured: Secured, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = secured.key("tenant-a")
    prefix = key.split("_")[1]
    compared: list[tuple[int, int]] = []
    real = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        compared.append((len(a), len(b)))
        return real(a, b)

    presented = {
        "wrong secret": f"jsk_{prefix}_{'B' * 43}",
        "unknown prefix": f"jsk_{'f' * 12}_{'B' * 43}",
        "malformed": "not-a-key",
        "right": key,
    }
    with secured.client() as api:
        api.get("/jobs", headers={"Authorization": f"Bearer {key}"})  # loaded
        monkeypatch.setattr(hmac, "compare_digest", spy)
        for what, candidate in presented.items():
            compared.clear()
            status = api.get("/jobs", headers={"Authorization": f"Bearer {candidate}"}).status_code
            assert status == (200 if what == "right" else 401), what
            assert compared == [(64, 64)], what  # one comparison of two SHA-256 digests, whatever was wrong


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer ", "Basic dXNlcjpwYXNz", "Token abc"])
def test_a_missing_or_other_scheme_is_401_with_the_bearer_challenge(secured: Secured, header: str | None) -> None:
    with secured.client() as api:
        response = api.get("/jobs", headers={"Authorization": header} if header is not None else {})
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="jobsched"'
    assert "Authorization: Bearer" in response.json()["error"]


def test_audit_logs_name_action_tenant_and_prefix_never_the_key(
    secured: Secured, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="jobsched.audit")
    admin = secured.key("ops", Role.ADMIN)
    reader = secured.key("tenant-a", Role.READER)
    with secured.client(admin) as api:
        created = api.post("/api-keys", json={"tenantId": "tenant-q", "role": "writer"}).json()
        api.delete(f"/api-keys/{created['prefix']}")
        api.post("/jobs", json=job_body(), headers={"Authorization": f"Bearer {reader}"})
        api.get("/jobs", headers={"Authorization": "Bearer jsk_ffffffffffff_" + "C" * 43})
        api.get("/jobs", headers={"Authorization": f"Bearer {created['key']}"})
    records = [r for r in caplog.records if r.name == "jobsched.audit"]
    by_action = [(vars(r).get("action"), vars(r).get("reason")) for r in records]
    assert ("key_created", None) in by_action
    assert ("key_revoked", None) in by_action
    assert ("request_denied", "role") in by_action
    assert ("request_denied", "unknown_key") in by_action
    created_log = next(
        r for r in records if vars(r).get("action") == "key_created" and vars(r).get("tenantId") == "tenant-q"
    )
    assert vars(created_log).get("keyPrefix") == created["prefix"]
    role_log = next(r for r in records if vars(r).get("reason") == "role")
    assert (vars(role_log).get("tenantId"), vars(role_log).get("keyPrefix")) == ("tenant-a", reader.split("_")[1])
    text = "\n".join(f"{r.getMessage()} {vars(r)}" for r in records)
    for secret in (admin, reader, created["key"]):
        assert secret not in text


# --- keys made or revoked elsewhere, and what a request's query and headers may say ---------------------------


class CountingKeys:
    """The test's key store, counting the lookups by prefix that the API makes."""

    def __init__(self, keys: KeyStore) -> None:
        self._keys = keys
        self.finds: list[str] = []

    def find(self, prefix: str) -> Any:
        self.finds.append(prefix)
        return self._keys.find(prefix)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._keys, name)


def test_a_key_made_elsewhere_works_at_its_first_request_and_one_revoked_here_at_once(secured: Secured) -> None:
    admin = secured.key("tenant-a", Role.ADMIN)
    with secured.client(admin, AUTH_REFRESH="1h") as api:  # no refresh during the test: only lookups can help
        assert api.get("/jobs").status_code == 200
        made_elsewhere = secured.key("tenant-a")  # as `jobsched keys create` or another replica makes it
        assert api.get("/jobs", headers={"Authorization": f"Bearer {made_elsewhere}"}).status_code == 200
        made_here = api.post("/api-keys", json={"tenantId": "tenant-b", "role": "reader"}).json()
        reader = {"Authorization": f"Bearer {made_here['key']}"}
        assert api.get("/jobs", headers=reader).status_code == 200
        assert api.delete(f"/api-keys/{made_here['prefix']}").status_code == 200
        assert api.get("/jobs", headers=reader).status_code == 401  # revoked on this replica: at once


def test_unknown_keys_cost_one_lookup_per_prefix_and_a_bounded_number_in_all(secured: Secured) -> None:
    from services.api.auth.key_cache import MISS_LOOKUP_BURST, MISS_LOOKUPS_PER_S
    from shared.keys import tokens

    counting = CountingKeys(secured.keys)
    spied = Secured(secured.store, counting, {"AUTH_REFRESH": "1h"})
    unknown = tokens.new_key()[0]
    with spied.client() as api:
        assert api.get("/jobs").status_code == 401  # no key; the keys are loaded meanwhile
        started = time.monotonic()
        for _ in range(30):
            assert api.get("/jobs", headers={"Authorization": f"Bearer {unknown}"}).status_code == 401
        assert counting.finds == [tokens.prefix_of(unknown)]
        made_up = [api.get("/jobs", headers={"Authorization": f"Bearer {tokens.new_key()[0]}"}) for _ in range(120)]
        elapsed = time.monotonic() - started
    looked_up = len(counting.finds) - 1
    assert looked_up <= MISS_LOOKUP_BURST + math.ceil(elapsed * MISS_LOOKUPS_PER_S)
    assert looked_up < len(made_up), "every made-up key was looked up in the store"
    # Past the budget a key is "not verified now" (503, retry), never "invalid": a new key may be real.
    assert {r.status_code for r in made_up} == {401, 503}
    deferred = next(r for r in made_up if r.status_code == 503)
    assert deferred.json() == {"error": "this API key cannot be verified now; retry"}
    assert deferred.headers["Retry-After"] == "1"


def test_two_authorization_headers_are_refused_not_read_as_the_first(secured: Secured) -> None:
    writer, reader = secured.key("tenant-a"), secured.key("tenant-b", Role.READER)
    with secured.client() as api:
        response = api.post(
            "/jobs",
            json=job_body(),
            headers=[("Authorization", f"Bearer {writer}"), ("Authorization", f"Bearer {reader}")],
        )
    assert response.status_code == 400
    assert response.json() == {"error": "send one Authorization header, not several"}
    assert tenant_jobs(secured.store, "tenant-a", None, 10) == []


@pytest.mark.parametrize("path", ["/overview", "/history", "/dlq", "/jobs"])
@pytest.mark.parametrize("role", [Role.READER, Role.WRITER])
def test_a_blank_or_repeated_tenant_in_the_query_is_a_clear_refusal(secured: Secured, path: str, role: Role) -> None:
    with secured.client(secured.key("tenant-a", role)) as api:
        blank = api.get(path, params={"tenantId": ""})
        repeated = api.get(path, params=[("tenantId", "tenant-a"), ("tenantId", "")])
        own = api.get(path, params={"tenantId": "tenant-a"})
    assert own.status_code == 200
    assert repeated.status_code == 400
    assert repeated.json() == {"error": "tenantId is given more than once"}
    if path == "/jobs":
        assert blank.status_code == 400
        assert blank.json() == {"error": "tenantId is required"}
    else:  # blank: every tenant, which only an admin key may read
        assert blank.status_code == 403
        assert "cannot read every tenant" in blank.json()["error"]


def test_an_admin_key_reads_every_tenant_with_a_blank_tenant(secured: Secured) -> None:
    secured.store.create(job_from("tenant-b", "b-1"))
    with secured.client(secured.key("tenant-a", Role.ADMIN)) as admin:
        overview = admin.get("/overview", params={"tenantId": ""})
    assert overview.status_code == 200
    assert "tenant-b" in overview.json()["tenants"]
