"""The credential endpoints on both stores, with AUTH=off and AUTH=required: set, list, rotate, delete, no answer
ever holding a value, the bounds (400, 413, 409), the refusal without a key (503 naming the variable), roles and
tenant isolation; and every write of an http job's payload refused (400) when it names a credential its tenant
does not have."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from starlette.testclient import TestClient

from services.api.app import create_app
from services.api.auth.api_auth import api_auth
from services.api.routes.credentials import MAX_BODY_BYTES
from shared.config import Settings
from shared.handlers.builtin import builtin_types
from shared.http_jobs.credentials import MAX_PER_TENANT, MAX_VALUE_BYTES
from shared.http_jobs.job_type import http_job_types
from shared.job_types.known import KnownTypes
from shared.keys.base import KeyStore, Role
from shared.keys.manage import issue_key
from shared.model import utc_now
from shared.sealing import KEY_VARIABLE, Keyring, key_from_text, new_key_text
from shared.store.base import JobStore
from tests.integration.test_api import WHEN, job_body
from tests.secret_traces import assert_absent
from tests.support import LOCAL, backend_beside

KEYRING = Keyring(key_from_text(new_key_text(), "test"))
TOKEN = "sk_live_api_0123456789"
TENANT = {"tenantId": "tenant-a"}
REFERENCE = {"credential": "billing-token", "prefix": "Bearer "}


@dataclass
class Api:
    """The API over the test's store, in the test's auth mode; its secrets sealed with `keyring`."""

    store: JobStore
    keys: KeyStore
    auth: str

    @contextmanager
    def client(
        self, tenant: str = "tenant-a", role: Role | None = Role.WRITER, keyring: Keyring | None = KEYRING
    ) -> Iterator[TestClient]:
        backend = backend_beside(self.store, keyring)
        served = builtin_types(demo=True)
        served.include(http_job_types(Settings(), backend.signing_secrets, backend.credentials))
        known = KnownTypes(backend.job_types, local=served)
        headers: dict[str, str] = {}
        if self.auth == "off":
            app = create_app(backend, known_types=known)
        else:
            settings = Settings.from_env({"AUTH": "required", "AUTH_REFRESH": "200ms"})
            app = create_app(backend, api_auth(settings, lambda: self.keys), known_types=known)
            if role is not None:
                headers["Authorization"] = f"Bearer {issue_key(self.keys, tenant, role, 'tests', by='tests')[0]}"
        with TestClient(app, raise_server_exceptions=False, headers=headers, base_url=LOCAL) as client:
            yield client

    def set(self, tenant: str, name: str, value: str = TOKEN) -> None:
        backend_beside(self.store, KEYRING).credentials.set(tenant, name, value, utc_now())


@pytest.fixture
def api(api_store: JobStore, api_keys: KeyStore, auth_mode: str) -> Api:
    return Api(api_store, api_keys, auth_mode)


@pytest.fixture
def secured(api_store: JobStore, api_keys: KeyStore) -> Api:
    return Api(api_store, api_keys, "required")


def http_job(key: str, headers: dict[str, Any], **fields: Any) -> dict[str, Any]:
    payload = {"url": "https://billing.example.com/charge", "headers": headers}
    return job_body(idempotencyKey=key, jobType="http", payload=payload, **fields)


def test_set_list_rotate_and_delete_and_no_answer_holds_a_value(api: Api) -> None:
    answers: list[str] = []
    with api.client() as client:
        made = client.put("/credentials/billing-token", params=TENANT, json={"value": TOKEN})
        assert made.status_code == 201, made.text
        assert set(made.json()) == {"name", "tenantId", "createdAt", "updatedAt"}
        assert (made.json()["name"], made.json()["tenantId"]) == ("billing-token", "tenant-a")
        rotated = client.put("/credentials/billing-token", params=TENANT, json={"value": TOKEN + "-2"})
        assert rotated.status_code == 200
        assert rotated.json()["createdAt"] == made.json()["createdAt"]
        listed = client.get("/credentials", params=TENANT)
        assert [c["name"] for c in listed.json()] == ["billing-token"]
        job = client.post("/jobs", json=http_job("uses-it", {"Authorization": REFERENCE}))
        assert job.status_code == 201, job.text
        assert job.json()["payload"]["headers"] == {"Authorization": REFERENCE}  # the reference, kept as given
        shown = client.get(f"/jobs/{job.json()['id']}")
        deleted = client.delete("/credentials/billing-token", params=TENANT)
        assert deleted.json() == {"name": "billing-token", "tenantId": "tenant-a", "deleted": True}
        again = client.delete("/credentials/billing-token", params=TENANT)
        assert again.status_code == 404
        assert client.get("/credentials", params=TENANT).json() == []
        answers += [r.text for r in (made, rotated, listed, job, shown, deleted, again)]
        answers.append(client.get("/openapi.json").text)
    for text in answers:
        for value in (TOKEN, TOKEN + "-2"):
            assert_absent(value, text, "an answer of the API")


@pytest.mark.parametrize(
    ("path", "body", "status", "reason"),
    [
        ("/credentials/bad%20name", {"value": "v"}, 400, "name: a credential's name is 1 to 128"),
        ("/credentials/-dash", {"value": "v"}, 400, "name:"),
        (f"/credentials/{'x' * 129}", {"value": "v"}, 400, "name:"),
        ("/credentials/ok", {"value": ""}, 400, "non-empty string"),
        ("/credentials/ok", {"value": 42}, 400, "non-empty string"),
        ("/credentials/ok", {"value": "two\nlines"}, 400, "printable ASCII"),
        ("/credentials/ok", {"value": "naïve"}, 400, "printable ASCII"),
        ("/credentials/ok", {}, 400, 'the body is {"value": "..."}'),
        ("/credentials/ok", {"value": "v", "tenantId": "tenant-a"}, 400, "the value only"),
        ("/credentials/ok", ["v"], 400, 'the body is {"value"'),
        ("/credentials/ok", {"value": "x" * (MAX_VALUE_BYTES + 1)}, 413, f"at most {MAX_VALUE_BYTES} bytes"),
        ("/credentials/ok", {"value": '"' * (MAX_BODY_BYTES // 2)}, 413, "request body is"),
    ],
)
def test_bad_input_is_refused_and_nothing_stored(api: Api, path: str, body: Any, status: int, reason: str) -> None:
    with api.client() as client:
        answer = client.put(path, params=TENANT, json=body)
        assert answer.status_code == status, answer.text
        assert reason in answer.json()["error"]
        assert client.get("/credentials", params=TENANT).json() == []
        not_json = client.put("/credentials/ok", params=TENANT, content=b"value=x")
        assert not_json.status_code in (400, 415)


def test_the_largest_value_is_taken_and_one_more_credential_than_the_limit_is_409(api: Api) -> None:
    for index in range(MAX_PER_TENANT - 1):
        api.set("tenant-a", f"c{index:03d}")
    with api.client() as client:
        largest = client.put("/credentials/last", params=TENANT, json={"value": "x" * MAX_VALUE_BYTES})
        assert largest.status_code == 201, largest.text
        over = client.put("/credentials/one-more", params=TENANT, json={"value": "v"})
        assert over.status_code == 409
        assert "delete one first" in over.json()["error"]
        assert client.put("/credentials/c000", params=TENANT, json={"value": "rotated"}).status_code == 200
        assert len(client.get("/credentials", params=TENANT).json()) == MAX_PER_TENANT


def test_without_a_key_nothing_is_stored_and_the_503_names_the_variable(api: Api) -> None:
    api.set("tenant-a", "billing-token")
    with api.client(keyring=None) as client:
        refused = client.put("/credentials/new-one", params=TENANT, json={"value": TOKEN})
        assert refused.status_code == 503
        assert "credentials cannot be stored" in refused.json()["error"]
        assert KEY_VARIABLE in refused.json()["error"]
        assert [c["name"] for c in client.get("/credentials", params=TENANT).json()] == ["billing-token"]
        secrets = client.get("/signing-secrets", params=TENANT)
        assert secrets.status_code == 200, secrets.text  # none yet: nothing to open
    backend_beside(api.store, KEYRING).signing_secrets.add("tenant-a", utc_now())  # sealed by a keyed process
    with api.client(keyring=None) as client:
        sealed = client.get("/signing-secrets", params=TENANT)
        assert sealed.status_code == 503
        assert KEY_VARIABLE in sealed.json()["error"]
        assert client.delete("/credentials/billing-token", params=TENANT).status_code == 200  # no key needed
    with api.client() as client:
        assert client.get("/signing-secrets", params=TENANT).status_code == 200


@pytest.mark.parametrize("role", [None, Role.READER, Role.WRITER, Role.ADMIN], ids=lambda r: r or "no-key")
def test_readers_list_writers_change(secured: Api, role: Role | None) -> None:
    secured.set("tenant-a", "billing-token")
    with secured.client(role=role) as client:
        listed = client.get("/credentials", params=TENANT)
        put = client.put("/credentials/made", params=TENANT, json={"value": TOKEN})
        deleted = client.delete("/credentials/billing-token", params=TENANT)
    statuses = (listed.status_code, put.status_code, deleted.status_code)
    if role is None:
        assert statuses == (401, 401, 401)
    elif role is Role.READER:
        assert statuses == (200, 403, 403)
        assert "writer" in put.json()["error"]
    else:
        assert statuses == (200, 201, 200)


def test_a_tenants_credentials_are_its_own(secured: Api) -> None:
    secured.set("tenant-a", "billing-token")
    with secured.client(tenant="tenant-b") as other:
        assert other.get("/credentials", params=TENANT).status_code == 403
        assert other.put("/credentials/billing-token", params=TENANT, json={"value": "x"}).status_code == 403
        assert other.delete("/credentials/billing-token", params=TENANT).status_code == 403
        assert other.get("/credentials").json() == []  # its own: none
        assert other.delete("/credentials/billing-token").status_code == 404  # not one of its own
        refused = other.post("/jobs", json=http_job("borrow", {"Authorization": REFERENCE}, tenantId=None))
        assert refused.status_code == 400  # tenant-a's credential is not tenant-b's
        assert refused.json()["error"] == (
            "payload.headers.Authorization: no credential named 'billing-token' (PUT /credentials/billing-token)"
        )
        made = other.put("/credentials/billing-token", json={"value": "theirs"})
        assert (made.status_code, made.json()["tenantId"]) == (201, "tenant-b")
    with secured.client(tenant="admin", role=Role.ADMIN) as admin:
        assert [c["name"] for c in admin.get("/credentials", params=TENANT).json()] == ["billing-token"]
    assert backend_beside(secured.store, KEYRING).credentials.value("tenant-a", "billing-token") == TOKEN


def test_every_write_of_a_payload_that_names_a_missing_credential_is_refused(api: Api) -> None:
    api.set("tenant-a", "billing-token")
    missing = {"Authorization": {"credential": "gone"}}
    error = "payload.headers.Authorization: no credential named 'gone' (PUT /credentials/gone)"
    with api.client() as client:
        refused = client.post("/jobs", json=http_job("a", missing))
        assert (refused.status_code, refused.json()["error"]) == (400, error)
        malformed = client.post("/jobs", json=http_job("b", {"Authorization": {"credential": "gone", "x": 1}}))
        assert malformed.status_code == 400
        assert "payload.headers.Authorization: a credential reference is" in malformed.json()["error"]
        batch = client.post(
            "/jobs/batch", json={"jobs": [http_job("c", missing), http_job("d", {"Authorization": REFERENCE})]}
        )
        assert batch.status_code == 200, batch.text
        [first, second] = batch.json()["results"]
        assert (first["status"], first["error"], second["status"]) == (400, error, 201)
        template = client.post(
            "/jobs", json=http_job("tpl", {"Authorization": REFERENCE}, scheduledAt=None, interval="1h")
        )
        assert template.status_code == 201, template.text
        tpl = template.json()["id"]
        patched = client.patch(f"/jobs/{tpl}", json={"payload": {"url": "https://x.example.com/", "headers": missing}})
        assert (patched.status_code, patched.json()["error"]) == (400, error)
        triggered = client.post(
            f"/jobs/{tpl}/trigger", json={"payload": {"url": "https://x.example.com/", "headers": missing}}
        )
        assert (triggered.status_code, triggered.json()["error"]) == (400, error)
        one_off = client.post("/jobs", json=http_job("e", {"Authorization": REFERENCE}, scheduledAt=WHEN))
        run_patch = client.patch(
            f"/jobs/{one_off.json()['id']}", json={"payload": {"url": "https://x.example.com/", "headers": missing}}
        )
        assert (run_patch.status_code, run_patch.json()["error"]) == (400, error)
        applied = client.post(
            "/schedules/apply",
            json={**TENANT, "schedules": [http_job("from-file", missing, scheduledAt=None, cron="0 * * * *")]},
        )
        assert (applied.status_code, applied.json()["error"]) == (400, error)
        keys = {j["idempotencyKey"] for j in client.get("/jobs", params={**TENANT, "limit": "100"}).json()}
        assert keys == {"d", "tpl", "e"}  # nothing refused was stored
        assert client.get(f"/jobs/{tpl}").json()["payload"]["headers"] == {"Authorization": REFERENCE}
