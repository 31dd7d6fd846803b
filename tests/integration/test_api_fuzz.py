"""Property test: whatever JSON a client sends to the API, the answer is never a 5xx and errors are bodies
(in both authentication modes: with AUTH=required the body also passes the tenant check)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
FIELDS = [
    "idempotencyKey",
    "tenantId",
    "jobType",
    "scheduledAt",
    "payload",
    "priority",
    "maxAttempts",
    "timeoutSeconds",
    "cron",
    "interval",
    "timezone",
]
plausible = {
    "jobType": st.sampled_from(["noop", "log-message", "flaky", "slow", "nope", ""]),
    "scheduledAt": st.sampled_from(
        [
            "2026-09-29T18:00:00Z",
            "2026-02-30T00:00:00Z",
            "9999-12-31T23:59:59+14:00",
            "0001-01-01T00:00:00-23:59",
            "yesterday",
            "2026-09-29T18:00:00",
        ]
    ),
    "cron": st.sampled_from(
        ["* * * * *", "*/0 * * * *", "0 0 31 2 *", "@hourly", "@reboot", "1-2-3 * * * *", "0 0 * * * *", "L * * * *"]
    ),
    "interval": st.sampled_from(["30s", "0s", "1ms", "99999999999d", "-5m", "5"]),
    "timezone": st.sampled_from(["UTC", "Europe/Berlin", "../../etc/passwd", "", "Nope/Nope"]),
    "priority": st.integers(min_value=-(2**70), max_value=2**70),
}
bodies = (
    st.fixed_dictionaries({}, optional={name: plausible.get(name, json_values) | json_values for name in FIELDS})
    | json_values
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bodies)
def test_no_input_makes_the_api_fail(api: TestClient, auth_mode: str, body: Any) -> None:
    response = api.post("/jobs", json=body)
    another_tenant = (403,) if auth_mode == "required" else ()  # a body naming a tenant not the key's
    assert response.status_code in (201, 400, 409, 413, *another_tenant), response.text
    if response.status_code != 201:
        assert isinstance(response.json()["error"], str)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    job_id=st.text(max_size=40), tenant=st.text(max_size=20), status=st.text(max_size=12), limit=st.text(max_size=25)
)
def test_no_path_or_query_makes_the_api_fail(
    api: TestClient, job_id: str, tenant: str, status: str, limit: str
) -> None:
    path = f"/jobs/{quote(job_id, safe='')}"
    for response in (
        api.get(path),
        api.delete(path),
        api.get("/jobs", params={"tenantId": tenant, "status": status, "limit": limit}),
    ):
        assert response.status_code < 500, response.text
