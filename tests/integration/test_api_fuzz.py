"""Property tests: whatever a client sends, the API never answers 5xx, every error is a body, and what it
accepted can afterwards be run, read, listed and brought to an end, on both stores.

The bodies mix plausible fields with the value classes that broke the API before: numbers JSON cannot carry
back (NaN, infinities, 1e999, integers past 64 bits), lone surrogates and NUL characters, duplicate keys,
nesting from shallow to hundreds of levels, strings of thousands of characters, RFC 3339 look-alikes and
edge instants, oversized schedules, and bodies that are not declared JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from shared.store.base import JobStore
from tests.integration.product import run_what_is_due

FINAL = {"completed", "dlq", "cancelled"}
JSON = {"content-type": "application/json"}

plain_text = st.text(max_size=30)
hostile_text = (
    st.text(st.characters(categories=["Cs"]), min_size=1, max_size=2)  # lone surrogates
    | st.sampled_from(["a\x00b", "\x00"])
    | st.integers(min_value=257, max_value=12_000).map(lambda n: "x" * n)
)
hostile_key = st.sampled_from(["$set", "$", "a.b", ".", "a\x00"]) | hostile_text
numbers = st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False)
hostile_number = st.sampled_from([2**63, -(2**63) - 1, 2**70]) | st.sampled_from([float("nan"), float("inf")])
json_values = st.recursive(
    st.none() | st.booleans() | numbers | plain_text,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(plain_text | st.sampled_from(["", "_id", "ключ"]), children, max_size=4)
    ),
    max_leaves=12,
)
# One hostile value or key inside an otherwise ordinary object, so that the rest of a body can be valid.
payloads = (
    st.dictionaries(plain_text, json_values, max_size=5)
    | st.builds(lambda d, k, v: {**d, k: v}, st.dictionaries(plain_text, json_values, max_size=3), plain_text,
                hostile_text | hostile_number)
    | st.builds(lambda d, k: {**d, k: 1}, st.dictionaries(plain_text, json_values, max_size=3), hostile_key)
)  # fmt: skip
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
    "tenantId": st.sampled_from(["tenant-a", "fuzz-b"]),  # tenant-a: the key's when AUTH=required
    "scheduledAt": st.sampled_from(
        [
            "2026-09-29T18:00:00Z",
            "2026-09-29t18:00:00z",
            "2026-09-29T18:00:00.123456789+05:30",
            "2026-06-30T23:59:60Z",
            "2026-02-30T00:00:00Z",
            "9999-12-31T23:59:59+14:00",
            "9999-12-31T23:59:59-01:00",
            "0001-01-01T00:00:00+01:00",
            "0001-01-01T00:00:00-23:59",
            "0001-01-01T00:00:00Z",
            "20260101T000000Z",
            "2026-W01-1T00:00:00Z",
            "2026-09-29T18:00:00+0100",
            "2026-09-29 18:00:00Z",
            "yesterday",
            "2026-09-29T18:00:00",
        ]
    ),
    "cron": st.sampled_from(
        ["* * * * *", "*/0 * * * *", "0 0 31 2 *", "@hourly", "@reboot", "1-2-3 * * * *", "0 0 * * * *", "L * * * *"]
    )
    | st.integers(min_value=200, max_value=600_000).map(lambda n: "1," * (n // 2) + "1 * * * *"),
    "interval": st.sampled_from(["30s", "0s", "1ms", "99999999h", "99999999999d", "-5m", "5", "1e308s"]),
    "timezone": st.sampled_from(["UTC", "Europe/Berlin", "../../etc/passwd", "", "Nope/Nope", "x" * 600, "a\x00b"]),
    "priority": st.integers(min_value=-(2**70), max_value=2**70),
    "payload": payloads | json_values,
}
objects = st.fixed_dictionaries(
    {}, optional={name: plausible.get(name, json_values) | json_values | hostile_text for name in FIELDS}
)
# A valid job with some fields replaced by plausible or hostile values: most of these reach the store.
valid = st.fixed_dictionaries(
    {
        "idempotencyKey": st.uuids().map(str),
        "tenantId": plausible["tenantId"],
        "jobType": st.sampled_from(["noop", "log-message", "flaky"]),
        "scheduledAt": st.just("2020-01-01T00:00:00Z"),
    }
)
altered = st.builds(
    lambda base, changes: {**base, **changes},
    valid,
    st.fixed_dictionaries({}, optional={name: plausible.get(name, json_values) for name in FIELDS}),
)


hostile_payload = st.builds(lambda base, payload: {**base, "payload": payload}, valid, payloads)


def deep(value: Any, levels: int) -> Any:
    for _ in range(levels):
        value = {"a": value}
    return value


def encode(body: Any) -> bytes:
    """JSON text as a careless client writes it: NaN and Infinity literals, lone surrogates as \\u escapes."""
    return json.dumps(body, allow_nan=True).encode()


Mutation = Callable[[bytes], bytes]


def unchanged(raw: bytes) -> bytes:
    return raw


mutations: st.SearchStrategy[Mutation] = (
    st.just(unchanged)
    | st.sampled_from(
        [
            lambda raw: raw.replace(b"{", b'{"tenantId": "dup", ', 1) if raw.startswith(b"{") else raw,  # duplicate
            lambda raw: raw.replace(b"0", b"1e999", 1),
            lambda raw: raw.replace(b"1", b"1" * 5000, 1),
            lambda raw: b"\xef\xbb\xbf" + raw,
            lambda raw: raw[:-1],
        ]
    )
)
# Bodies as sent: the JSON value, extra nesting of its payload, a change to its text, the declared type.
clean = st.tuples(st.one_of(hostile_payload, altered), st.just(0), st.just(unchanged), st.just("application/json"))
messy = st.tuples(
    st.one_of(hostile_payload, altered, objects, json_values),
    st.just(0) | st.sampled_from([1, 30, 31, 32, 33, 500, 1200]),
    mutations,
    st.just("application/json")
    | st.sampled_from(["application/json; charset=utf-8", "text/plain", "application/x-www-form-urlencoded"]),
)
bodies = clean | messy


def bring_to_an_end(api: TestClient, store: JobStore, accepted: list[str]) -> None:
    """Run what is due, cancel the rest: every accepted job is readable, ends, and has its executions."""
    run_what_is_due(store)
    for job_id in accepted:
        job = api.get(f"/jobs/{job_id}")
        assert job.status_code == 200, job.text
        if job.json()["status"] not in FINAL:
            cancelled = api.delete(f"/jobs/{job_id}")
            assert cancelled.status_code == 200, cancelled.text
        assert api.get(f"/jobs/{job_id}").json()["status"] in FINAL
        assert api.get(f"/jobs/{job_id}/executions").status_code == 200


def test_hostile_bodies_never_fail_the_api_and_what_it_accepted_ends_well(
    api: TestClient, api_store: JobStore, auth_mode: str
) -> None:
    accepted: list[str] = []
    another_tenant = (403,) if auth_mode == "required" else ()  # a body naming a tenant not the key's

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(case=bodies)
    def post(case: tuple[Any, int, Mutation, str]) -> None:
        body, nesting, mutate, content_type = case
        if isinstance(body, dict) and nesting:
            body = {**body, "payload": deep(body.get("payload", {}), nesting)}
        try:
            raw = mutate(encode(body))
        except RecursionError:  # the test's own encoder gave up: nothing to send
            return
        response = api.post("/jobs", content=raw, headers={"content-type": content_type})
        assert response.status_code in (201, 400, 409, 413, 415, *another_tenant), response.text
        if response.status_code == 201:
            accepted.append(response.json()["id"])
        else:
            assert isinstance(response.json()["error"], str)
            assert len(response.json()["error"]) < 1000
        if not content_type.startswith("application/json"):
            assert response.status_code == 415

    post()
    assert accepted, "no body was accepted: the strategies no longer reach the store"
    bring_to_an_end(api, api_store, accepted)
    for tenant in {api.get(f"/jobs/{j}").json()["tenantId"] for j in accepted}:
        listing = api.get("/jobs", params={"tenantId": tenant, "limit": "5000"})
        assert listing.status_code == 200, listing.text
        assert all(j["status"] in FINAL for j in listing.json())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    job_id=st.text(max_size=40) | st.sampled_from(["ABCDEF0123456789ABCDEF01", "x" * 10_000]),
    tenant=st.text(max_size=20) | st.just("t" * 10_000),
    status=st.text(max_size=12),
    limit=st.text(max_size=25) | st.sampled_from(["+5", "1_0", "٣", "5" * 5000, "0005", " 5"]),
)
def test_no_path_or_query_makes_the_api_fail(
    api: TestClient, job_id: str, tenant: str, status: str, limit: str
) -> None:
    path = f"/jobs/{quote(job_id, safe='')}"
    for response in (
        api.get(path),
        api.delete(path),
        api.get(f"{path}/executions"),
        api.post(f"{path}/retry"),
        api.get("/jobs", params={"tenantId": tenant, "status": status, "limit": limit}),
    ):
        assert response.status_code < 500, response.text
        if response.status_code >= 400:
            assert len(response.json()["error"]) < 1000


batch_jobs = st.lists(st.one_of(hostile_payload, altered, objects, json_values), min_size=1, max_size=6)
batches = st.tuples(
    st.builds(lambda jobs: {"jobs": jobs}, batch_jobs)
    | st.builds(
        lambda jobs, tenant: {"tenantId": tenant, "jobs": jobs}, batch_jobs, plausible["tenantId"] | json_values
    )
    | objects
    | json_values,
    mutations,
)


def test_hostile_batches_never_fail_the_api_and_each_job_is_answered(
    api: TestClient, api_store: JobStore, auth_mode: str
) -> None:
    accepted: list[str] = []
    another_tenant = (403,) if auth_mode == "required" else ()

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(case=batches)
    def post(case: tuple[Any, Mutation]) -> None:
        body, mutate = case
        response = api.post("/jobs/batch", content=mutate(encode(body)), headers=JSON)
        assert response.status_code in (200, 400, 413, *another_tenant), response.text
        answer = response.json()
        if response.status_code != 200:
            assert isinstance(answer["error"], str)
            return
        assert len(answer["results"]) == len(body["jobs"])
        for result in answer["results"]:
            assert result["status"] in (201, 400, 409, 413), result
            if result["status"] == 201:
                accepted.append(result["id"])
            else:
                assert isinstance(result["error"], str)
                assert len(result["error"]) < 1000

    post()
    assert accepted, "no job was accepted: the strategies no longer reach the store"
    bring_to_an_end(api, api_store, accepted)
