"""Hostile but fair input to the API, one test per class of defect, on both stores (the HTTP server's own limits,
which need a real socket, are in tests/e2e/test_http_limits.py)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import anyio.to_thread
import bson
import httpx2 as httpx
import pytest
from bson import ObjectId
from bson.raw_bson import RawBSONDocument
from prometheus_client import generate_latest
from starlette.testclient import TestClient

from jobsched import HandlerError, JobTypes
from services.api.app import create_app
from services.api.http.request_metrics import KNOWN_METHODS
from services.api.routes.pages import FIRST_PAGE_JOBS
from shared import metrics
from shared.cron import MAX_CRON_LENGTH, MAX_INTERVAL_LENGTH, MAX_TIMEZONE_LENGTH
from shared.jsonsafe import MAX_DEPTH
from shared.model import MAX_PAYLOAD_BYTES, format_time
from shared.store.base import JobStore
from shared.store.mongo import MongoJobStore
from shared.store.sqlite import SqliteJobStore
from tests.integration.product import run_what_is_due
from tests.support import LOCAL, backend_beside

WHEN = "2999-09-29T18:00:00Z"  # not due: nothing runs unless a test says so
JSON = {"content-type": "application/json"}
INTERNALS = ("Traceback", "Error:", "Exception", "pydantic", "char ", "<class", "Expecting")


def body(**overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "idempotencyKey": f"k-{ObjectId()}",
        "tenantId": "tenant-a",  # the tenant of the test client's key when AUTH=required
        "jobType": "noop",
        "scheduledAt": WHEN,
        "payload": {},
    }
    fields.update(overrides)
    return {k: v for k, v in fields.items() if v is not None}


def post_raw(api: TestClient, text: str, content_type: str = "application/json") -> httpx.Response:
    return api.post("/jobs", content=text.encode("utf-8", "surrogatepass"), headers={"content-type": content_type})


def listed(api: TestClient, **params: str) -> list[dict[str, Any]]:
    response = api.get("/jobs", params={"tenantId": "tenant-a", "limit": "5000", **params})
    assert response.status_code == 200, response.text
    result: list[dict[str, Any]] = response.json()
    return result


def deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


# --- 1. a value JSON cannot carry back out is refused, and one already stored never breaks a read ----------


@pytest.mark.parametrize(
    "payload_text",
    [
        '{"n": 1e999}',
        '{"n": -1e999}',
        '{"n": NaN}',
        '{"n": Infinity}',
        '{"n": -Infinity}',
        '{"s": "\\udfff"}',
        '{"s": "\\ud800x"}',
        '{"\\udfff": 1}',
        '{"s": "a\\u0000b"}',
        '{"n": 18446744073709551616}',
        '{"n": 1' + "0" * 5000 + "}",
        json.dumps(deep(MAX_DEPTH)),
        json.dumps(deep(500)),
        "[" * 100_000 + "]" * 100_000,
    ],
)
def test_a_value_json_cannot_carry_back_is_400_and_nothing_is_stored(api: TestClient, payload_text: str) -> None:
    text = json.dumps(body(payload="PAYLOAD")).replace('"PAYLOAD"', payload_text)
    response = post_raw(api, text)
    assert response.status_code == 400, response.text
    assert len(response.json()["error"]) < 300
    assert listed(api) == []


def test_a_surrogate_pair_is_text_and_is_accepted(api: TestClient) -> None:
    text = json.dumps(body(payload="PAYLOAD")).replace('"PAYLOAD"', '{"emoji": "\\ud83d\\ude00", "deep": %s}')
    response = post_raw(api, text % json.dumps(deep(MAX_DEPTH - 2)))
    assert response.status_code == 201, response.text
    assert response.json()["payload"]["emoji"] == "\U0001f600"


def poison(store: JobStore, job_id: str) -> dict[str, Any]:
    """Write into the job what an older version could have stored; return its documented rendering."""
    if isinstance(store, SqliteJobStore):
        with sqlite3.connect(store.path) as conn:  # JSON text as Python wrote it before: NaN, escapes
            conn.execute(
                "UPDATE jobs SET payload = ? WHERE id = ?",
                ('{"big": Infinity, "small": -Infinity, "nan": NaN, "s": "\\udfff", "ok": 1}', job_id),
            )
        return {"big": None, "small": None, "nan": None, "s": "\ufffd", "ok": 1}
    assert isinstance(store, MongoJobStore)
    # Not UTF-8 (MongoDB keeps such bytes as written; the stand-in replaces them when it stores them).
    update = bson.encode({"$set": {"payload": {"s": "PLACEHOLDR", "ok": 1}}})
    not_utf8 = RawBSONDocument(update.replace(b"PLACEHOLDR", b"\xed\xbf\xbf-after!"))  # same length
    store.database.jobs.update_one({"_id": ObjectId(job_id)}, not_utf8)
    return {"s": "\ufffd\ufffd\ufffd-after!", "ok": 1}


def test_a_value_stored_by_an_older_version_never_breaks_reads_or_the_run(api: TestClient, api_store: JobStore) -> None:
    job = api.post("/jobs", json=body(scheduledAt="2020-01-01T00:00:00Z")).json()
    neighbour = api.post("/jobs", json=body()).json()
    rendering = poison(api_store, job["id"])

    got = api.get(f"/jobs/{job['id']}")
    assert got.status_code == 200, got.text
    assert got.json()["payload"] == rendering
    assert {j["id"] for j in listed(api)} == {job["id"], neighbour["id"]}
    run_what_is_due(api_store)  # the handler gets the stored value; the job ends as any other
    assert api.get(f"/jobs/{job['id']}").json()["status"] == "completed"
    assert api.get(f"/jobs/{job['id']}/executions").status_code == 200
    assert api.delete(f"/jobs/{neighbour['id']}").status_code == 200


def test_a_handler_error_in_any_characters_is_recorded_and_the_job_moves_on(api_store: JobStore) -> None:
    """lastError comes from the handler, not the client: what a store cannot hold is replaced, so the outcome is
    written instead of the attempt being left to the reaper."""
    registry = JobTypes()

    @registry.handler("noop")
    def fails(payload: dict[str, Any], ctx: Any) -> None:
        raise HandlerError("bad \udfff and \x00 here")

    with TestClient(create_app(backend_beside(api_store)), base_url=LOCAL) as api:
        job = api.post("/jobs", json=body(scheduledAt="2020-01-01T00:00:00Z", maxAttempts=1)).json()
        run_what_is_due(api_store, registry)
        done = api.get(f"/jobs/{job['id']}").json()
    assert done["status"] == "dlq"
    assert done["lastError"] == "HandlerError: bad \ufffd and \ufffd here"


# --- 3. expensive steps are bounded and never on the event loop -------------------------------------------


@pytest.mark.parametrize(
    ("field", "limit", "valid"),
    [
        ("cron", MAX_CRON_LENGTH, "0 0 * * *"),
        ("interval", MAX_INTERVAL_LENGTH, "30s"),
        ("timezone", MAX_TIMEZONE_LENGTH, "UTC"),
    ],
)
def test_schedule_texts_have_a_maximum_length(api: TestClient, field: str, limit: int, valid: str) -> None:
    def recurring(**schedule: str) -> dict[str, Any]:
        base = {"cron": "0 0 * * *"} if field == "timezone" else {}
        return body(scheduledAt=None, **{**base, **schedule})

    at_limit = valid if field == "timezone" else valid.ljust(limit)  # trailing blanks are ignored by the parsers
    assert api.post("/jobs", json=recurring(**{field: at_limit})).status_code == 201
    for too_long in (valid.ljust(limit + 1), "1," * 255_000 + "1 * * * *"):
        response = api.post("/jobs", json=recurring(**{field: too_long}))
        assert response.status_code == 400, response.text
        assert str(limit) in response.json()["error"]
        assert len(response.json()["error"]) < 300


async def until(condition: Callable[[], bool]) -> None:
    while not condition():  # noqa: ASYNC110 - the thread limiter signals nothing; its counters are all there is
        await asyncio.sleep(0.01)


@asynccontextmanager
async def every_worker_thread_taken() -> AsyncIterator[anyio.CapacityLimiter]:
    limiter = anyio.to_thread.current_default_thread_limiter()
    gate = threading.Event()
    holders = [asyncio.create_task(anyio.to_thread.run_sync(gate.wait)) for _ in range(int(limiter.total_tokens))]
    await until(lambda: limiter.borrowed_tokens == limiter.total_tokens)
    try:
        yield limiter
    finally:
        gate.set()
        await asyncio.gather(*holders)


def test_validation_and_large_bodies_wait_for_a_worker_thread_not_the_event_loop(api_store: JobStore) -> None:
    """With every worker thread taken, a create that fails validation (so it needs no store) cannot finish:
    its parsing and validation wait for a thread, while /healthz is still answered on the loop."""

    async def scenario() -> None:
        transport = httpx.ASGITransport(app=create_app(backend_beside(api_store)))
        async with httpx.AsyncClient(transport=transport, base_url=LOCAL) as client:
            requests: list[Callable[[], Coroutine[Any, Any, httpx.Response]]] = [
                lambda: client.post("/jobs", json=body(jobType="no-such-type", payload={"filler": "x" * 100_000})),
                lambda: client.post("/jobs", json=body(scheduledAt=None, cron="0 0 30 2 *")),  # finds no time
                lambda: client.get("/schedules/preview", params={"cron": "0 0 30 2 *"}),  # the same search
            ]
            for bad in requests:
                async with every_worker_thread_taken() as limiter:
                    request = asyncio.create_task(bad())
                    await until(lambda: limiter.statistics().tasks_waiting > 0)
                    assert (await client.get("/healthz")).status_code == 200
                    assert not request.done()
                assert (await request).status_code == 400

    asyncio.run(scenario())


# --- 4. what used to be a 500 ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {"scheduledAt": "0001-01-01T00:00:00+01:00"},
        {"scheduledAt": "9999-12-31T23:59:59-01:00"},
        {"scheduledAt": None, "interval": "99999999h"},
        {"scheduledAt": None, "interval": "99999999999d"},
        {"scheduledAt": None, "cron": "0 0 * * *", "timezone": "x" * 600},
        {"scheduledAt": None, "cron": "0 0 * * *", "timezone": "Europe/../../etc"},
        {"payload": deep(500)},
    ],
)
def test_former_500s_are_400s(api: TestClient, overrides: dict[str, Any]) -> None:
    response = post_raw(api, json.dumps(body(**overrides)))
    assert response.status_code == 400, response.text
    assert not any(word in response.json()["error"] for word in INTERNALS), response.text


def test_the_edges_of_the_calendar_are_accepted_and_written_in_rfc_3339(api: TestClient) -> None:
    first = api.post("/jobs", json=body(scheduledAt="0001-01-01T00:00:00Z"))
    assert first.status_code == 201, first.text
    assert first.json()["scheduledAt"] == "0001-01-01T00:00:00Z"
    assert api.get(f"/jobs/{first.json()['id']}").json()["scheduledAt"] == "0001-01-01T00:00:00Z"
    last = api.post("/jobs", json=body(scheduledAt="9999-12-31T23:59:59.999+00:00"))
    assert last.json()["scheduledAt"] == "9999-12-31T23:59:59.999Z"
    offset = api.post("/jobs", json=body(scheduledAt="0999-06-01T01:30:00+01:30"))
    assert offset.json()["scheduledAt"] == "0999-06-01T00:00:00Z"


# --- 6. metric labels only from fixed sets -----------------------------------------------------------------


def test_metric_labels_take_only_known_methods_and_routes(api: TestClient) -> None:
    def labels() -> set[tuple[str, str]]:
        return {(s.labels["method"], s.labels["route"]) for m in metrics.API_REQUESTS.collect() for s in m.samples}

    api.get("/healthz")
    before, size_before = labels(), len(generate_latest())
    for n in range(100):
        api.request(f"JUNK{n}", "/jobs")
        api.request(f"JUNK{n}", f"/no-such-route-{n}")
        api.get(f"/jobs/{'a' * 24}/nothing-{n}")
    added = labels() - before  # the registry is the process's: other tests' requests are in it too
    growth = len(generate_latest()) - size_before
    routes = {r.path for r in api.app.routes} | {"unmatched"}  # type: ignore[attr-defined]
    assert {method for method, _ in added} <= KNOWN_METHODS | {"other"}
    assert {route for _, route in added} <= routes
    assert growth < 20_000, f"/metrics grew by {growth} bytes for 300 junk requests"


# --- 8. format and contract slips ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("2026-09-29t18:00:00z", "2026-09-29T18:00:00Z"),
        ("2026-09-29T18:00:00.123456789+00:00", "2026-09-29T18:00:00.123Z"),
        ("2026-09-29T20:00:00-00:00", "2026-09-29T20:00:00Z"),
        ("2016-12-31T23:59:60Z", "2017-01-01T00:00:00Z"),
    ],
)
def test_every_rfc_3339_form_is_accepted(api: TestClient, given: str, stored: str) -> None:
    response = api.post("/jobs", json=body(scheduledAt=given))
    assert response.status_code == 201, response.text
    assert response.json()["scheduledAt"] == stored


@pytest.mark.parametrize(
    "given",
    [
        "20260101T000000Z",
        "2026-W01-1T00:00:00Z",
        "2026-09-29T18:00:00+0100",
        "2026-09-29 18:00:00Z",
        "2026-09-29T18:00Z",
        "2026-09-29T18:00:00",
        "2026-273T18:00:00Z",
        "\uff12\uff10\uff12\uff16-09-29T18:00:00Z"  # fullwidth digits,
        "2026-09-29T24:00:00Z",
        "2026-09-29T18:00:00+24:00",
    ],
)
def test_forms_that_are_not_rfc_3339_are_refused(api: TestClient, given: str) -> None:
    response = api.post("/jobs", json=body(scheduledAt=given))
    assert response.status_code == 400, response.text
    assert "RFC 3339" in response.json()["error"] or "range" in response.json()["error"]


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonp"],
)
def test_a_body_must_be_declared_json(api: TestClient, content_type: str | None) -> None:
    headers = {"content-type": content_type} if content_type else {}
    response = api.post("/jobs", content=json.dumps(body()).encode(), headers=headers)
    assert response.status_code == 415, response.text
    assert "application/json" in response.json()["error"]
    assert listed(api) == []
    job = api.post("/jobs", json=body()).json()
    form = api.post(f"/jobs/{job['id']}/retry", content=b"", headers={"content-type": "text/plain"})
    assert form.status_code == 415  # a form or text/plain POST from another site is refused on every route


def test_json_declared_with_a_charset_or_a_suffix_is_accepted(api: TestClient) -> None:
    for content_type in ("application/json; charset=utf-8", "Application/JSON", "application/vnd.jobsched+json"):
        response = api.post("/jobs", content=json.dumps(body()).encode(), headers={"content-type": content_type})
        assert response.status_code == 201, (content_type, response.text)
    latin = api.post(
        "/jobs", content=json.dumps(body()).encode(), headers={"content-type": "application/json; charset=latin-1"}
    )
    assert latin.status_code == 415


def test_duplicate_keys_are_refused(api: TestClient) -> None:
    text = json.dumps(body(payload={"a": 1}))
    for duplicated in (
        text.replace('"payload"', '"tenantId": "other", "payload"'),
        text.replace('{"a"', '{"a": 0, "a"'),
    ):
        response = post_raw(api, duplicated)
        assert response.status_code == 400, response.text
        assert "duplicate key" in response.json()["error"]
    assert listed(api) == []


def test_limit_is_ascii_digits_or_the_default(api: TestClient) -> None:
    for _ in range(6):
        api.post("/jobs", json=body())
    assert len(listed(api, limit="5")) == 5
    assert len(listed(api, limit="0005")) == 5
    for odd in ("+5", "1_0", "\u0663", "\uff15", " 5", "5 ", "-5", "5" * 5000, "0"):
        assert len(listed(api, limit=odd)) == 6, odd


def test_executions_are_found_by_an_uppercase_id_as_the_job_is(api: TestClient, api_store: JobStore) -> None:
    job = api.post("/jobs", json=body(scheduledAt="2020-01-01T00:00:00Z")).json()
    run_what_is_due(api_store)
    upper = job["id"].upper()
    assert api.get(f"/jobs/{upper}").json()["id"] == job["id"]
    executions = api.get(f"/jobs/{upper}/executions").json()
    assert [e["outcome"] for e in executions] == ["succeeded"]
    assert executions == api.get(f"/jobs/{job['id']}/executions").json()


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("PUT", "/jobs", "GET, HEAD, POST"),
        ("PUT", f"/jobs/{'a' * 24}", "DELETE, GET, HEAD, PATCH"),
        ("GET", f"/jobs/{'a' * 24}/retry", "POST"),
        ("BREW", "/healthz", "GET, HEAD"),
    ],
)
def test_405_names_every_allowed_method(api: TestClient, method: str, path: str, allow: str) -> None:
    response = api.request(method, path)
    assert response.status_code == 405
    assert response.headers["allow"] == allow
    assert response.json()["error"]


def test_errors_echo_at_most_a_short_piece_of_the_input_and_no_internals(api: TestClient) -> None:
    long = "z" * 10_000
    responses = [
        api.get(f"/jobs/{long}"),
        api.delete(f"/jobs/{long}"),
        api.get(f"/jobs/{long}/executions"),
        api.get("/jobs", params={"tenantId": "t", "status": long}),
        api.post("/jobs", json=body(jobType=long)),
        api.post("/jobs", json=body(idempotencyKey=long)),
        api.post("/jobs", json={**body(), long: 1}),
        api.post("/jobs", json=body(scheduledAt=long)),
        api.post("/jobs", json=body(scheduledAt=None, cron=long[:200])),
        post_raw(api, '{"idempotencyKey": '),
        api.post("/jobs", content=b"\xff\xfe", headers=JSON),
    ]
    for response in responses:
        assert 400 <= response.status_code < 500, response.text
        message = response.json()["error"]
        assert len(message) < 300, message
        assert not any(word in message for word in INTERNALS), message


def test_payload_size_is_counted_in_utf8_bytes_of_compact_json(api: TestClient) -> None:
    overhead = len('{"t":""}')
    cjk = "漢" * ((MAX_PAYLOAD_BYTES - overhead) // 3)  # 3 bytes each in UTF-8, 6 as a \\u escape
    accepted = api.post("/jobs", json=body(payload={"t": cjk}))
    assert accepted.status_code == 201, accepted.text[:300]
    exact = "x" * (MAX_PAYLOAD_BYTES - overhead - len(cjk.encode()))
    assert api.post("/jobs", json=body(payload={"t": cjk + exact})).status_code == 201
    too_big = api.post("/jobs", json=body(payload={"t": cjk + exact + "x"}))
    assert too_big.status_code == 413
    assert str(MAX_PAYLOAD_BYTES) in too_big.json()["error"]


# --- 7. listings stream in pages, in both cursor directions ------------------------------------------------


def test_a_long_listing_read_in_pages_is_the_listing_in_order(api: TestClient) -> None:
    for _ in range(3 * FIRST_PAGE_JOBS + 5):
        api.post("/jobs", json=body())
    whole = listed(api)
    assert len(whole) == 3 * FIRST_PAGE_JOBS + 5
    assert [j["id"] for j in listed(api, limit=str(2 * FIRST_PAGE_JOBS + 3))] == [j["id"] for j in whole][
        : 2 * FIRST_PAGE_JOBS + 3
    ]
    oldest = whole[-1]
    cursor = f"{oldest['createdAt']}_{oldest['id']}"
    newer = listed(api, after=cursor, limit=str(2 * FIRST_PAGE_JOBS + 3))  # read upwards in pages, sent reversed
    assert [j["id"] for j in newer] == [j["id"] for j in whole][-1 - (2 * FIRST_PAGE_JOBS + 3) : -1]
    older = listed(api, before=f"{whole[4]['createdAt']}_{whole[4]['id']}")
    assert [j["id"] for j in older] == [j["id"] for j in whole][5:]


# --- the schedule and operator endpoints meet the same rules ------------------------------------------------


def template(api: TestClient, **fields: Any) -> dict[str, Any]:
    response = api.post("/jobs", json=body(scheduledAt=None, cron="0 0 * * *", payload={"keep": 1}, **fields))
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


# What the strict reader refuses wherever it sits in a body: each placed as the value of a text field and
# inside an object (a payload).
REFUSED_VALUES = ["1e999", "NaN", "-Infinity", '"\\udfff"', '"a\\u0000b"', "18446744073709551616", "1" + "0" * 5000]
BODY_ROUTES = [  # (method, path under the template, the body with VALUE where a hostile value goes)
    ("POST", "/pause", '{"note": VALUE}'),
    ("POST", "/pause", '{"note": "n", "note": "duplicate"}'),
    ("POST", "/trigger", '{"payload": {"v": VALUE}}'),
    ("POST", "/trigger", '{"idempotencyKey": VALUE}'),
    ("POST", "/backfill", '{"from": VALUE, "to": "2030-01-02T00:00:00Z"}'),
    ("PATCH", "", '{"payload": {"v": VALUE}}'),
    ("PATCH", "", '{"cron": "0 1 * * *", "timezone": VALUE}'),
    ("PATCH", "", '{"jitter": VALUE}'),
    ("PATCH", "", '{"payload": DEEP}'),
]


@pytest.mark.parametrize(("method", "suffix", "template_text"), BODY_ROUTES)
def test_schedule_bodies_are_read_strictly_and_change_nothing_when_refused(
    api: TestClient, method: str, suffix: str, template_text: str
) -> None:
    tpl = template(api)
    path = f"/jobs/{tpl['id']}{suffix}"
    texts = [template_text.replace("VALUE", v).replace("DEEP", json.dumps(deep(500))) for v in REFUSED_VALUES]
    for text in dict.fromkeys(texts):
        response = api.request(method, path, content=text.encode("utf-8", "surrogatepass"), headers=JSON)
        assert response.status_code == 400, (text[:80], response.text)
        message = response.json()["error"]
        assert len(message) < 300, message
        assert not any(word in message for word in INTERNALS), message
    assert api.get(f"/jobs/{tpl['id']}").json() == tpl
    assert api.get(f"/jobs/{tpl['id']}/runs").json() == []


def test_schedule_and_operator_bodies_must_be_declared_json(api: TestClient) -> None:
    tpl = template(api)
    once = api.post("/jobs", json=body()).json()
    for method, path, text in (
        ("POST", f"/jobs/{tpl['id']}/pause", '{"note": "n"}'),
        ("POST", f"/jobs/{tpl['id']}/trigger", "{}"),
        ("POST", f"/jobs/{tpl['id']}/backfill", '{"from": "2030-01-01T00:00:00Z", "to": "2030-01-02T00:00:00Z"}'),
        ("PATCH", f"/jobs/{tpl['id']}", '{"priority": 5}'),
        ("PATCH", f"/jobs/{once['id']}", '{"priority": 5}'),
        ("POST", "/dlq/redrive", f'{{"jobIds": ["{once["id"]}"]}}'),
    ):
        for content_type in ("text/plain", "application/x-www-form-urlencoded"):
            response = api.request(method, path, content=text.encode(), headers={"content-type": content_type})
            assert response.status_code == 415, (path, response.text)
    assert api.get(f"/jobs/{tpl['id']}").json() == tpl
    assert api.get(f"/jobs/{once['id']}").json() == once
    # Without a body, a route whose body is optional needs no Content-Type; one that needs a body says so.
    assert api.post(f"/jobs/{tpl['id']}/pause").status_code == 200
    needs_body = api.patch(f"/jobs/{tpl['id']}")
    assert needs_body.status_code == 400
    assert "JSON body" in needs_body.json()["error"]


@pytest.mark.parametrize(
    "text",
    [
        '{"lastError": "a\\u0000b"}',
        '{"lastError": "\\udfff"}',
        '{"jobIds": ["aaaaaaaaaaaaaaaaaaaaaaaa"], "jobIds": []}',
        '{"lastError": 1e999}',
        json.dumps({"lastError": deep(500)}),
    ],
)
def test_redrive_bodies_are_read_strictly(api: TestClient, text: str) -> None:
    response = api.post("/dlq/redrive", content=text.encode("utf-8", "surrogatepass"), headers=JSON)
    assert response.status_code == 400, response.text
    assert len(response.json()["error"]) < 300


@pytest.mark.parametrize(
    ("field", "limit", "valid"),
    [
        ("cron", MAX_CRON_LENGTH, "0 0 * * *"),
        ("interval", MAX_INTERVAL_LENGTH, "30s"),
        ("timezone", MAX_TIMEZONE_LENGTH, "UTC"),
        ("jitter", MAX_INTERVAL_LENGTH, "30s"),
        ("catchupWindow", MAX_INTERVAL_LENGTH, "1h"),
    ],
)
def test_schedule_texts_have_their_maximum_length_on_patch_and_preview(
    api: TestClient, field: str, limit: int, valid: str
) -> None:
    tpl = template(api)
    for too_long in (valid.ljust(limit + 1), "1," * 255_000 + "1 * * * *"):
        patched = api.patch(f"/jobs/{tpl['id']}", json={field: too_long})
        assert patched.status_code == 400, patched.text
        assert str(limit) in patched.json()["error"]
        assert len(patched.json()["error"]) < 300
        if field in ("cron", "interval", "timezone"):
            too_long = too_long[:20_000]  # as long as a URL this client sends may be
            query = {"cron": "0 0 * * *", field: too_long} if field == "timezone" else {field: too_long}
            preview = api.get("/schedules/preview", params=query)
            assert preview.status_code == 400, preview.text
            assert str(limit) in preview.json()["error"]
            assert len(preview.json()["error"]) < 300
    assert api.get(f"/jobs/{tpl['id']}").json() == tpl
    assert api.patch(f"/jobs/{tpl['id']}", json={field: valid}).status_code == 200


def test_a_nul_in_a_path_or_query_is_a_400_on_every_route(api: TestClient) -> None:
    """No stored text holds a NUL (bodies refuse it), so no filter or id with one can match; the stand-in's
    PostgreSQL fails a query holding one, which used to be a 500 for the listings and the operator's reads."""
    tpl = template(api)
    nul = "a\x00b"
    for path, params in (
        ("/jobs", {"tenantId": nul}),
        ("/jobs", {"tenantId": "tenant-a", "jobType": nul}),
        ("/jobs", {"tenantId": "tenant-a", "templateId": nul}),
        ("/overview", {"tenantId": nul}),
        ("/dlq", {"tenantId": nul}),
        ("/schedules/preview", {"cron": "0 0 * * *", "timezone": nul}),
        (f"/jobs/{tpl['id']}/runs", {"limit": nul}),
        (f"/jobs/{tpl['id']}/upcoming", {"count": nul}),
        (f"/jobs/{tpl['id'][:12]}%00{tpl['id'][13:]}", {}),
    ):
        response = api.get(path, params=params)
        assert response.status_code == 400, (path, params, response.text)
        assert "NUL" in response.json()["error"]
    assert listed(api)[0]["id"] == tpl["id"]


def test_schedule_and_operator_errors_echo_at_most_a_short_piece_and_no_internals(api: TestClient) -> None:
    long = "z" * 10_000
    tpl = template(api)
    base = f"/jobs/{tpl['id']}"
    responses = [
        api.post(f"/jobs/{long}/pause"),
        api.patch(f"/jobs/{long}", json={"priority": 1}),
        api.patch(base, json={long: 1}),
        api.patch(base, json={"cron": long[:200]}),
        api.patch(base, json={"startAt": long}),
        api.post(f"{base}/trigger", json={"idempotencyKey": long}),
        api.post(f"{base}/trigger", json={"overlap": long}),
        api.post(f"{base}/backfill", json={"from": long, "to": long}),
        api.post(f"{base}/pause", json={"note": long}),
        api.get(f"{base}/upcoming", params={"count": long}),
        api.get("/schedules/preview", params={"cron": long[:200]}),
        api.get("/schedules/preview", params={"interval": "1h", "timezone": long[:60]}),
        api.post("/dlq/redrive", json={"jobIds": [long]}),
        api.post("/dlq/redrive", json={"lastError": long}),
        api.post("/dlq/redrive", json={long: 1}),
        api.get("/jobs", params={"tenantId": "tenant-a", "kind": long}),
        api.get("/jobs", params={"tenantId": "tenant-a", "before": long}),
    ]
    for response in responses:
        assert 400 <= response.status_code < 500, response.text[:300]
        message = response.json()["error"]
        assert "z" * 65 not in message, message  # each echo shortened to 64 characters
        assert len(message) < 1000, message
        assert not any(word in message.replace("lastError", "") for word in INTERNALS), message


def test_schedule_routes_read_ids_case_insensitively(api: TestClient) -> None:
    tpl = template(api)
    upper = tpl["id"].upper()
    assert api.post(f"/jobs/{upper}/pause").json()["paused"] is True
    assert api.post(f"/jobs/{upper}/resume").json()["paused"] is False
    run = api.post(f"/jobs/{upper}/trigger", json={})
    assert run.status_code == 201, run.text
    assert [r["id"] for r in api.get(f"/jobs/{upper}/runs").json()] == [run.json()["id"]]
    assert api.patch(f"/jobs/{upper}", json={"priority": 3}).json()["priority"] == 3
    once = api.post("/jobs", json=body(scheduledAt="2020-01-01T00:00:00Z", maxAttempts=1)).json()
    redriven = api.post("/dlq/redrive", json={"jobIds": [once["id"].upper()]})
    assert redriven.status_code == 200
    assert redriven.json()["refused"][0]["id"] == once["id"]  # found (not in the DLQ), not "no such job"
    assert "not found" not in redriven.json()["refused"][0]["error"]


def test_stored_values_json_cannot_carry_never_break_the_schedule_routes(api: TestClient, api_store: JobStore) -> None:
    tpl = template(api)
    rendering = poison(api_store, tpl["id"])
    assert api.get(f"/jobs/{tpl['id']}").json()["payload"] == rendering
    run = api.post(f"/jobs/{tpl['id']}/trigger", json={})  # the run copies the stored payload
    assert run.status_code == 201, run.text
    assert run.json()["payload"] == rendering
    assert api.get(f"/jobs/{tpl['id']}/runs").status_code == 200
    assert api.post(f"/jobs/{tpl['id']}/pause", json={"note": "poisoned"}).status_code == 200
    assert api.patch(f"/jobs/{tpl['id']}", json={"priority": 2}).json()["payload"] == rendering
    assert api.get("/overview").status_code == 200
    assert api.get("/dlq").status_code == 200


def test_a_templates_runs_longer_than_a_page_are_listed_in_order(api: TestClient) -> None:
    tpl = template(api)
    count = 3 * FIRST_PAGE_JOBS + 5
    start = datetime(2030, 1, 1, tzinfo=UTC)  # daily fire times at midnight
    window = {"from": format_time(start), "to": format_time(start + timedelta(days=count))}
    assert api.post(f"/jobs/{tpl['id']}/backfill", json=window).json()["spawned"] == count
    whole = api.get(f"/jobs/{tpl['id']}/runs", params={"limit": "5000"}).json()
    assert len(whole) == count
    planned = [r["plannedAt"] for r in whole]
    assert planned == sorted(planned, reverse=True)
    assert len(set(planned)) == count
    part = api.get(f"/jobs/{tpl['id']}/runs", params={"limit": str(2 * FIRST_PAGE_JOBS + 3)}).json()
    assert [r["id"] for r in part] == [r["id"] for r in whole][: 2 * FIRST_PAGE_JOBS + 3]


def test_the_dlq_lists_dead_letters_without_their_payloads(api: TestClient, api_store: JobStore) -> None:
    big = {"f": "x" * (MAX_PAYLOAD_BYTES - 1024)}
    jobs = [
        api.post(
            "/jobs",
            json=body(
                scheduledAt="2020-01-01T00:00:00Z", maxAttempts=1, jobType="flaky", payload={**big, "failRate": 1.0}
            ),
        ).json()
        for _ in range(3)
    ]
    run_what_is_due(api_store)
    assert {api.get(f"/jobs/{j['id']}").json()["status"] for j in jobs} == {"dlq"}
    response = api.get("/dlq")
    assert response.status_code == 200
    assert len(response.content) < 64 * 1024  # three 255 KiB payloads are not in it
    [group] = response.json()
    assert {j["id"] for j in group["jobs"]} == {j["id"] for j in jobs}
    assert all("payload" not in j for j in group["jobs"])
    assert api.get(f"/jobs/{jobs[0]['id']}").json()["payload"]["f"] == big["f"]
