"""AUTH=off on both stores: web pages cannot drive the API. A request for a Host the API is not bound for (DNS
rebinding) gets nothing; a change asked by a page of another origin is refused; programs (no browser
headers) and the API's own console (same origin) are served as before."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from services.api.app import create_app
from services.api.http.same_origin import allowed_hosts, host_name
from shared.config import Settings
from shared.model import Status
from shared.store.base import JobStore
from tests.integration.test_api import job_body
from tests.support import LOCAL, backend_beside

REBOUND = "rebind.attacker.example"


@pytest.fixture
def api(api_store: JobStore) -> Iterator[TestClient]:
    with TestClient(create_app(backend_beside(api_store)), raise_server_exceptions=False, base_url=LOCAL) as client:
        yield client


@pytest.fixture
def job_id(api: TestClient) -> str:
    created = api.post("/jobs", json=job_body())
    assert created.status_code == 201
    return str(created.json()["id"])


@pytest.mark.parametrize("host", [REBOUND, f"{REBOUND}:8080", "10.0.0.8:8080", "localhost.attacker.example"])
def test_a_host_the_api_is_not_bound_for_is_served_nothing(api: TestClient, job_id: str, host: str) -> None:
    read = api.get(f"/jobs/{job_id}", headers={"Host": host})
    listed = api.get("/jobs", params={"tenantId": "tenant-a"}, headers={"Host": host})
    cancelled = api.delete(f"/jobs/{job_id}", headers={"Host": host})
    for response in (read, listed, cancelled):
        assert response.status_code == 400
        assert "does not serve the host" in response.json()["error"]
        assert "API_ALLOWED_HOSTS" in response.json()["error"]
    assert api.get(f"/jobs/{job_id}").json()["status"] == Status.PENDING.value
    assert api.get("/healthz", headers={"Host": host}).status_code == 200  # probes name the pod's address


@pytest.mark.parametrize("host", ["localhost:8080", "127.0.0.1:8080", "[::1]:8080", "LOCALHOST", "localhost."])
def test_loopback_names_are_served(api: TestClient, job_id: str, host: str) -> None:
    assert api.get(f"/jobs/{job_id}", headers={"Host": host}).status_code == 200


@pytest.mark.parametrize(
    "browser",
    [
        {"Sec-Fetch-Site": "cross-site", "Origin": "https://attacker.example"},
        {"Sec-Fetch-Site": "same-site", "Origin": "http://other.localhost:8080"},
        {"Origin": "https://attacker.example"},  # a browser that sends no Sec-Fetch-Site
        {"Origin": "null"},  # a sandboxed page or a file
        {"Origin": "http://localhost:9999"},  # this host, another port: another origin
        {"Origin": "http://["},  # not a URL at all
        {"Origin": "http://a]b"},
    ],
)
def test_a_change_asked_by_another_origins_page_is_refused(
    api: TestClient, job_id: str, browser: dict[str, str]
) -> None:
    # A body-less POST is what a page can send without a CORS preflight.
    for method, url in (("POST", f"/jobs/{job_id}/retry"), ("DELETE", f"/jobs/{job_id}"), ("POST", "/jobs")):
        response = api.request(method, url, headers=browser)
        assert response.status_code == 403, (method, url)
        assert "another origin" in response.json()["error"]
    assert api.get(f"/jobs/{job_id}").json()["status"] == Status.PENDING.value
    assert api.get(f"/jobs/{job_id}", headers=browser).status_code == 200  # reads: the page cannot see them


@pytest.mark.parametrize(
    "caller",
    [
        {},  # a program: curl, the client, a script
        {"Sec-Fetch-Site": "same-origin", "Origin": "http://localhost"},  # the console
        {"Sec-Fetch-Site": "none"},  # typed by the user
        {"Origin": "http://localhost"},  # a browser without Sec-Fetch-Site, same origin
    ],
)
def test_programs_and_the_apis_own_pages_change_jobs(api: TestClient, job_id: str, caller: dict[str, str]) -> None:
    cancelled = api.delete(f"/jobs/{job_id}", headers=caller)
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == Status.CANCELLED.value


def test_the_allowed_hosts_are_the_loopback_names_and_the_bound_address_unless_configured() -> None:
    assert allowed_hosts(Settings.from_env({})) == ("localhost", "127.0.0.1", "::1")
    assert allowed_hosts(Settings.from_env({"API_HOST": "10.1.2.3", "AUTH": "off"}))[-1] == "10.1.2.3"
    assert allowed_hosts(Settings.from_env({"API_HOST": "0.0.0.0", "AUTH": "off"})) == ("localhost", "127.0.0.1", "::1")
    configured = Settings.from_env({"API_ALLOWED_HOSTS": "jobs.internal, Jobs.Example, [fd00::1]:8080, x.y.:80, *"})
    assert allowed_hosts(configured) == ("jobs.internal", "jobs.example", "fd00::1", "x.y", "*")
    assert [host_name(h) for h in ("[::1]:80", "a.b:1", "A.B.", "x", "::1")] == ["::1", "a.b", "a.b", "x", "::1"]


def test_a_configured_host_is_served_and_star_serves_any(api_store: JobStore) -> None:
    for hosts, host, status in (((REBOUND,), REBOUND, 200), (("*",), "anything.example", 200), ((REBOUND,), "x", 400)):
        app = create_app(backend_beside(api_store), allowed_hosts=hosts)
        with TestClient(app, raise_server_exceptions=False, base_url=LOCAL) as client:
            assert client.get("/jobs", params={"tenantId": "t"}, headers={"Host": host}).status_code == status
