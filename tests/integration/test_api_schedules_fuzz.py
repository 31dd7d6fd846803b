"""Property test: whatever a client sends to the schedule endpoints, the answer is never a 5xx and errors are
bodies (both stores). Bodies hold any text (NUL and lone surrogates included) and any float (NaN and the
infinities, written as Python's encoder writes them), as a hostile client can send them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

text = st.text(max_size=20)  # every code point: NUL and lone surrogates too
query_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=20)  # what a URL can carry (NUL too)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(text, children, max_size=3),
    max_leaves=8,
)
times = st.sampled_from(
    [
        "2026-01-01T00:00:00Z",
        "2026-01-01T05:30:00+02:00",
        "2026-01-02T00:00:00Z",
        "2030-01-01T00:00:00Z",
        "9999-12-31T23:59:59+14:00",
        "0001-01-01T00:00:00-23:59",
        "soon",
        "",
    ]
)
durations = st.sampled_from(["30s", "0s", "-1m", "1h30m", "5", "99999999999d", ""])
plausible: dict[str, Any] = {
    "overlap": st.sampled_from(["allow_all", "skip", "buffer_one", "buffer_all", "cancel_other", "none"]),
    "catchup": st.sampled_from(["latest", "all", "none", "some"]),
    "catchupWindow": durations,
    "jitter": durations,
    "startAt": times,
    "endAt": times,
    "scheduledAt": times,
    "from": times,
    "to": times,
    "remainingRuns": st.integers(min_value=-3, max_value=2**40),
    "pauseOnFailure": st.booleans(),
    "cron": st.sampled_from(["* * * * *", "0 0 31 2 *", "@hourly", "@reboot", "61 * * * *"]),
    "interval": st.sampled_from(["30s", "0s", "1ms", "-5m", "99999999999d"]),
    "timezone": st.sampled_from(["UTC", "Europe/Berlin", "Nope/Nope", ""]),
    "priority": st.integers(min_value=-(2**40), max_value=2**40),
    "maxAttempts": st.integers(min_value=-5, max_value=5000),
    "timeoutSeconds": st.floats(min_value=-1, max_value=10**6, allow_nan=False),
    "note": text,
    "idempotencyKey": text,
}


def body_of(names: list[str]) -> st.SearchStrategy[Any]:
    fields = {name: plausible.get(name, json_values) | json_values for name in names}
    return st.fixed_dictionaries({}, optional=fields) | json_values


POLICY = ["overlap", "catchup", "catchupWindow", "startAt", "endAt", "remainingRuns", "jitter", "pauseOnFailure"]
PATCH = [*POLICY, "cron", "interval", "timezone", "payload", "priority", "maxAttempts", "timeoutSeconds", "scheduledAt"]
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def created(api: TestClient, body: dict[str, Any]) -> str:
    response = api.post("/jobs", json={"tenantId": "tenant-a", "jobType": "noop", **body})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


@pytest.fixture
def targets(api: TestClient) -> dict[str, str]:
    """Made once per test and shared by its examples: a template to change, one to drive, a one-off job."""
    return {
        "patched": created(api, {"idempotencyKey": "patched", "cron": "0 * * * *"}),
        "driven": created(api, {"idempotencyKey": "driven", "cron": "0 * * * *"}),
        "once": created(api, {"idempotencyKey": "once", "scheduledAt": "2030-01-01T00:00:00Z"}),
    }


def sent(value: Any) -> dict[str, Any]:
    """The request arguments of a JSON body as Python writes it: NaN, Infinity and lone surrogates as escapes."""
    return {"content": json.dumps(value).encode(), "headers": {"content-type": "application/json"}}


def answered(response: Any) -> None:
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert isinstance(response.json()["error"], str)


@FUZZ
@given(body=body_of([*POLICY, "cron", "interval", "timezone", "scheduledAt"]))
def test_no_template_body_makes_create_fail(api: TestClient, body: Any) -> None:
    if isinstance(body, dict):
        body = {"idempotencyKey": "fuzz", "tenantId": "tenant-a", "jobType": "noop", **body}
    answered(api.post("/jobs", **sent(body)))


@FUZZ
@given(template=body_of(PATCH), one_off=body_of(PATCH))
def test_no_patch_makes_the_api_fail(api: TestClient, targets: dict[str, str], template: Any, one_off: Any) -> None:
    answered(api.patch(f"/jobs/{targets['patched']}", **sent(template)))
    answered(api.patch(f"/jobs/{targets['once']}", **sent(one_off)))
    for job_id in (targets["patched"], targets["once"]):  # whatever was accepted reads back
        answered(api.get(f"/jobs/{job_id}"))


@FUZZ
@given(
    trigger=body_of(["payload", "overlap", "idempotencyKey"]),
    backfill=body_of(["from", "to", "overlap"]),
    pause=body_of(["note"]),
    count=query_text,
    preview=st.fixed_dictionaries(
        {}, optional={k: plausible[k] | query_text for k in ("cron", "interval", "timezone")}
    ),
)
def test_no_schedule_request_makes_the_api_fail(
    api: TestClient,
    targets: dict[str, str],
    trigger: Any,
    backfill: Any,
    pause: Any,
    count: str,
    preview: dict[str, str],
) -> None:
    tpl_id = targets["driven"]
    answered(api.post(f"/jobs/{tpl_id}/trigger", **sent(trigger)))
    answered(api.post(f"/jobs/{tpl_id}/backfill", **sent(backfill)))
    answered(api.post(f"/jobs/{tpl_id}/pause", **sent(pause)))
    answered(api.post(f"/jobs/{tpl_id}/resume", **sent(pause)))
    answered(api.get(f"/jobs/{tpl_id}/upcoming", params={"count": count}))
    answered(api.get(f"/jobs/{tpl_id}/runs", params={"limit": count}))
    answered(api.get("/schedules/preview", params={**preview, "count": count}))
    answered(api.get(f"/jobs/{tpl_id}/runs", params={"limit": "5000"}))  # what was triggered or backfilled reads back
