"""The console at /ui in a real headless Chromium, against `jobsched dev` (SQLite, no server).

One `jobsched dev` and one browser serve the module; every test works in a tenant of its own and a fresh tab,
and fails on any error in the browser console it did not provoke. The screenshots in docs/console/ are taken
here.
"""

from __future__ import annotations

import os
import re
import textwrap
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Page, expect

from shared.model import format_time, utc_now
from tests.e2e.browser import DESKTOP, PHONE, Browser, ConsoleErrors, chromium, screenshot
from tests.e2e.devmode import Dev
from tests.e2e.test_keys_cli import keys
from tests.support import wait_until

Tab = tuple[Page, ConsoleErrors]
LATER = timedelta(days=1)


# A job type that reports the progress its payload names, then works until it is cancelled: the built-in `slow`
# always reports {"sleptMs": ..., "of": ...}.
PROGRESS_PLUGIN = """
    import asyncio

    import jobsched

    jobs = jobsched.JobTypes()


    @jobs.handler("report-progress")
    async def report_progress(payload: dict, ctx: jobsched.HandlerContext) -> None:
        ctx.report_progress(payload["progress"])
        await asyncio.Event().wait()  # never set: the handler runs until the test cancels its job
"""


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dev]:
    made = Dev(tmp_path_factory.mktemp("console-dev"))
    plugins = tmp_path_factory.mktemp("console-plugins")
    (plugins / "console_progress.py").write_text(textwrap.dedent(PROGRESS_PLUGIN))
    python_path = os.pathsep.join(filter(None, [str(plugins), os.environ.get("PYTHONPATH")]))
    made.start(  # fax: a type the API accepts with no executor (yet) and no job
        JOB_TYPES="fax", JOBSCHED_HANDLERS="console_progress:jobs", PYTHONPATH=python_path
    )
    yield made
    for process in made.runs:
        process.stop()
    made.http.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as made:
        yield made


@pytest.fixture
def tab(browser: Browser) -> Iterator[Tab]:
    page, errors = browser.open(DESKTOP)
    yield page, errors
    page.close()
    assert errors.unexpected() == [], "errors in the browser console"


def ui(dev: Dev, route: str = "/") -> str:
    return f"http://127.0.0.1:{dev.port}/ui/#{route}"


def create(dev: Dev, tenant: str, key: str, job_type: str = "noop", **fields: Any) -> dict[str, Any]:
    body = {
        "idempotencyKey": f"{tenant}-{key}",
        "tenantId": tenant,
        "jobType": job_type,
        "payload": {},
        **fields,
    }
    if "cron" not in body and "interval" not in body:
        body.setdefault("scheduledAt", format_time(utc_now()))
    response = dev.http.post("/jobs", json=body)
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()
    return job


def job(dev: Dev, job_id: str) -> dict[str, Any]:
    found: dict[str, Any] = dev.http.get(f"/jobs/{job_id}").json()
    return found


def settled(dev: Dev, job_id: str, status: str) -> dict[str, Any]:
    return wait_until(lambda: (j := job(dev, job_id))["status"] == status and j, 60, f"job {job_id} to be {status}")


def dead_letter(dev: Dev, tenant: str, key: str) -> dict[str, Any]:
    made = create(dev, tenant, key, "flaky", payload={"failRate": 1}, maxAttempts=1)
    return settled(dev, made["id"], "dlq")


def chart_total(page: Page, series: str) -> int:
    """The sum of what one series of the page's charts draws (its path's data-values)."""
    values = page.locator(f'path[data-series="{series}"]').get_attribute("data-values") or ""
    return sum(int(v) for v in values.split(",") if v)


def test_the_history_charts_what_the_attempt_records_say_in_light_and_dark(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    made = [create(dev, "history", f"done-{n}") for n in range(4)]
    made.append(dead_letter(dev, "history", "dead"))
    ended = [settled(dev, j["id"], "completed") for j in made[:4]] + made[4:]
    # What the charts must say, from the jobs and their attempt records.
    attempts = [a for j in ended for a in dev.http.get(f"/jobs/{j['id']}/executions").json()]
    failed = sum(a["outcome"] in ("failed", "timeout", "lost") for a in attempts)
    assert (len(attempts), failed) == (5, 1)

    page.goto(ui(dev, "/history?tenantId=history"))
    expect(page.locator('[data-series="completed"]').first).to_be_visible()
    expect(page.locator('.legend [data-series="completed"]')).to_have_text("completed (4)")
    expect(page.locator('.legend [data-series="failed"]')).to_have_text(f"failed attempts ({failed})")
    expect(page.locator('.legend [data-series="dlq"]')).to_have_text("dead-lettered (1)")
    assert (chart_total(page, "completed"), chart_total(page, "failed")) == (4, failed)
    started = page.locator('path[data-series="p50"]').get_attribute("data-values") or ""
    assert [v for v in started.split(",") if v], "a minute with starts has a lateness"
    expect(page.locator("#refreshed")).to_contain_text(f"{len(attempts)} attempts started")
    values = page.locator('path[data-series="completed"]').get_attribute("data-values") or ""
    assert len(values.split(",")) == 60  # a point per minute of the last hour
    screenshot(page, "history")

    page.select_option("#job-type", "noop")
    expect(page).to_have_url(re.compile(r"jobType=noop"))
    expect(page.locator('.legend [data-series="failed"]')).to_have_text("failed attempts (0)")
    expect(page.locator('.legend [data-series="completed"]')).to_have_text("completed (4)")
    page.select_option("#range", "24h")
    expect(page).to_have_url(re.compile(r"range=24h"))
    expect(page.locator('path[data-series="completed"]')).to_have_attribute(
        "data-values", re.compile(r"^(\d+,){1439}\d+$")
    )

    # Dark: the same page in the system's dark theme, every line drawn in its own colour on a dark panel.
    light = page.evaluate("getComputedStyle(document.querySelector('.chart')).backgroundColor")
    page.emulate_media(color_scheme="dark")
    page.goto(ui(dev, "/history?tenantId=history"))
    expect(page.locator('.legend [data-series="completed"]')).to_have_text("completed (4)")
    dark = page.evaluate("getComputedStyle(document.querySelector('.chart')).backgroundColor")
    assert (light, dark) == ("rgb(255, 255, 255)", "rgb(23, 32, 42)")
    strokes = page.evaluate("[...document.querySelectorAll('path.line')].map((p) => getComputedStyle(p).stroke)")
    assert len(set(strokes[:3])) == 3
    assert "rgb(23, 32, 42)" not in strokes
    screenshot(page, "history-dark")
    page.emulate_media(color_scheme="light")


def test_the_overview_counts_the_jobs_created_and_refreshes_without_reloading(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    done = [create(dev, "overview", f"done-{n}") for n in range(3)]
    for made in done:
        settled(dev, made["id"], "completed")
    for n in range(2):
        create(dev, "overview", f"later-{n}", scheduledAt=format_time(utc_now() + LATER))
    dead_letter(dev, "overview", "dead")
    # Active, and never due while the test runs: its run would be a fourth completed noop job (an hourly one
    # made the listing below show four when the test crossed the hour).
    create(dev, "overview", "daily", cron=f"0 {(utc_now() + timedelta(hours=12)).hour} * * *")
    for n in range(2):
        paused = create(dev, "overview", f"paused-{n}", interval="1h")
        assert dev.http.post(f"/jobs/{paused['id']}/pause", json={}).status_code == 200

    limits = {
        "concurrency": 2,
        "concurrencyPerKey": 1,
        "rate": {"starts": 10, "perSeconds": 1},
        "ratePerKey": {"starts": 1, "perSeconds": 60, "burst": 2},
    }
    assert dev.http.put("/job-types/fax/limits", json=limits).status_code == 200

    page.goto(ui(dev, "/?tenantId=overview"))
    noop = page.locator('tr[data-job-type="noop"]')
    expect(noop.locator('td[data-status="completed"]')).to_have_text("3")
    expect(noop.locator('td[data-status="pending"]')).to_have_text("2")
    expect(noop.locator('td[data-recent="completed"]')).to_have_text("3")
    flaky = page.locator('tr[data-job-type="flaky"]')
    expect(flaky.locator('td[data-status="dlq"]')).to_have_text("1")
    expect(flaky.locator('td[data-recent="failed"]')).to_have_text("1")
    expect(page.locator('[data-count="dlq"]')).to_have_text("1")
    expect(noop.locator("td[data-executors]")).to_have_text("1")  # GET /job-types: jobsched dev's own executor
    fax = page.locator('tr[data-job-type="fax"]')
    expect(fax.locator("td[data-executors]")).to_have_text("0")
    expect(fax.locator('td[data-status="pending"]')).to_have_text("0")
    words = "2 at once, 1 per key, 10 per 1s, 1 per 60s (burst 2) per key"
    expect(fax.locator('td[data-limits="api"]')).to_have_text(words)
    expect(noop.locator("td[data-limits]")).to_have_text("none")
    expect(page.locator('[data-count="schedules-active"]')).to_have_text("1")
    expect(page.locator('[data-count="schedules-paused"]')).to_have_text("2")
    expect(page.locator("#tenant")).to_have_value("overview")
    expect(page.locator("#banner")).to_contain_text("AUTH=off")
    screenshot(page, "overview")

    page.evaluate("window.notReloaded = true")
    create(dev, "overview", "later-2", scheduledAt=format_time(utc_now() + LATER))
    expect(noop.locator('td[data-status="pending"]')).to_have_text("3", timeout=30_000)
    assert page.evaluate("window.notReloaded") is True

    noop.locator('td[data-status="completed"] a').click()
    expect(page).to_have_url(re.compile(r"#/jobs\?tenantId=overview&jobType=noop&status=completed$"))
    expect(page.locator("tbody tr")).to_have_count(3)


def test_a_dead_letter_is_found_with_its_error_and_redriven_from_the_dlq_page(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    dead = dead_letter(dev, "dlq-page", "dead")
    other = dead_letter(dev, "dlq-page", "other")

    page.goto(ui(dev, "/dlq?tenantId=dlq-page"))
    group = page.locator("section.group", has_text="flaky failed on purpose")
    expect(group.locator("h3")).to_have_text(dead["lastError"])
    expect(group.locator("tbody tr")).to_have_count(2)
    screenshot(page, "dlq")

    row = group.locator(f'tr[data-job-id="{dead["id"]}"]')
    row.get_by_role("button", name="Re-drive").click()
    dialog = page.locator("dialog#confirm")
    expect(dialog).to_be_visible()
    with page.expect_response(re.compile(r"/dlq/redrive$")) as answer:
        dialog.get_by_role("button", name="Re-drive").click()
    assert answer.value.json() == {"redriven": [dead["id"]], "refused": [], "more": False}
    expect(page.locator("#notice")).to_have_text(re.compile("Re-driven 1 job"))

    redriven = job(dev, dead["id"])
    assert redriven["attemptBase"] == 1  # re-driven: a fresh budget counted from the attempt made
    assert job(dev, other["id"])["attemptBase"] == 0
    # It is pending again, so the executor runs it once more (and flaky fails it back into the DLQ).
    wait_until(lambda: len(dev.http.get(f"/jobs/{dead['id']}/executions").json()) == 2, 60, "a second attempt")


def test_redriving_a_selection_and_a_whole_group(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    dead = [dead_letter(dev, "dlq-bulk", f"dead-{n}") for n in range(3)]

    page.goto(ui(dev, "/dlq?tenantId=dlq-bulk"))
    group = page.locator("section.group").first
    group.get_by_label(f"Select job {dead[0]['id']}").check()
    group.get_by_label(f"Select job {dead[1]['id']}").check()
    with page.expect_response(re.compile(r"/dlq/redrive$")) as answer:
        group.get_by_role("button", name="Re-drive selected").click()
        page.locator("dialog#confirm").get_by_role("button", name="Re-drive").click()
    assert sorted(answer.value.json()["redriven"]) == sorted(d["id"] for d in dead[:2])

    wait_until(lambda: all(job(dev, d["id"])["status"] == "dlq" for d in dead), 60, "the re-driven jobs to fail again")
    page.reload()
    group = page.locator("section.group").first
    with page.expect_response(re.compile(r"/dlq/redrive$")) as answer:
        group.get_by_role("button", name="Re-drive all 3").click()
        page.locator("dialog#confirm").get_by_role("button", name="Re-drive group").click()
    assert sorted(answer.value.json()["redriven"]) == sorted(d["id"] for d in dead)


def test_the_job_page_shows_the_trace_the_job_was_created_in(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    body = {"idempotencyKey": "traced", "tenantId": "job-trace", "jobType": "noop", "payload": {}}
    headers = {"traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"}
    made = dev.http.post("/jobs", json={**body, "scheduledAt": format_time(utc_now() + LATER)}, headers=headers)
    assert made.status_code == 201, made.text

    page.goto(ui(dev, f"/jobs/{made.json()['id']}"))
    expect(page.locator('[data-field="traceparent"]')).to_have_text(f"trace {trace_id}")


def test_the_job_page_shows_fields_payload_and_attempts_and_redrives(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    dead = dead_letter(dev, "job-page", "dead")

    page.goto(ui(dev, f"/jobs/{dead['id']}"))
    expect(page.locator('[data-field="lastError"]')).to_have_text(dead["lastError"])
    expect(page.locator('[data-field="idempotencyKey"]')).to_have_text("job-page-dead")
    expect(page.locator("#payload")).to_have_text('{\n  "failRate": 1\n}')
    attempt = page.locator('#attempts li[data-attempt="1"]')
    expect(attempt).to_contain_text("failed")
    expect(attempt).to_contain_text("dev-flaky")
    expect(attempt).to_contain_text(dead["lastError"])
    [record] = dev.http.get(f"/jobs/{dead['id']}/executions").json()
    where = 'shared/handlers/builtin.py", line '  # the file and line the handler raised at
    assert where in record["traceback"]
    assert record["traceback"].endswith(f"HandlerError: {dead['lastError'].split(': ', 1)[1]}\n")
    traceback = attempt.locator("details.traceback")
    expect(traceback.locator("pre")).not_to_be_visible()  # folded: the one-line error is what a reader sees first
    traceback.locator("summary").click()
    expect(traceback.locator("pre")).to_contain_text(where)
    screenshot(page, "job")

    page.locator("#redrive").click()
    screenshot(page, "confirm")
    with page.expect_response(re.compile(rf"/jobs/{dead['id']}/retry$")) as answer:
        page.locator("dialog#confirm").get_by_role("button", name="Re-drive").click()
    assert answer.value.status == 200
    assert answer.value.json()["status"] == "pending"
    expect(page.locator("#notice")).to_have_text(re.compile("pending again"))


def test_the_job_page_shows_what_the_handler_returned(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    done = settled(dev, create(dev, "result", "slept", "slow", payload={"sleepMs": 5})["id"], "completed")
    assert done["result"] == {"sleptMs": 5}

    page.goto(ui(dev, f"/jobs/{done['id']}"))
    expect(page.locator("#result")).to_have_text('{\n  "sleptMs": 5\n}')
    kept = page.locator('#attempts li[data-attempt="1"] details.result')
    kept.locator("summary").click()
    expect(kept.locator("pre")).to_have_text('{\n  "sleptMs": 5\n}')


def test_the_job_page_shows_a_running_handlers_progress(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    running = create(dev, "progress", "long", "slow", payload={"sleepMs": 120_000})
    reported = wait_until(lambda: job(dev, running["id"]).get("progress"), 30, "the slow job's progress")
    assert reported["attempt"] == 1
    assert reported["value"]["of"] == 120_000

    page.goto(ui(dev, f"/jobs/{running['id']}"))
    expect(page.locator("#progress-title")).to_have_text("Progress of attempt 1")
    expect(page.locator("#progress")).to_contain_text('"of": 120000')
    expect(page.locator("#progress-bar")).to_have_count(0)  # {"sleptMs", "of"}: none of the shapes of a bar
    assert dev.http.delete(f"/jobs/{running['id']}").status_code == 202  # asked to stop: it ends cancelled
    settled(dev, running["id"], "cancelled")


def test_progress_with_a_share_shows_a_bar_beside_its_json(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    report = {"done": 3, "total": 10}
    running = create(dev, "progress-bar", "steps", "report-progress", payload={"progress": report})
    wait_until(lambda: job(dev, running["id"]).get("progress"), 30, "the job's progress")

    page.goto(ui(dev, f"/jobs/{running['id']}"))
    bar = page.get_by_role("progressbar", name="Progress of attempt 1")
    expect(bar).to_have_attribute("value", "3")
    expect(bar).to_have_attribute("max", "10")
    assert bar.evaluate("bar => bar.position") == 0.3
    expect(page.locator("#progress-bar .progress-text")).to_have_text("30% (3 of 10)")
    expect(page.locator("#progress")).to_have_text('{\n  "done": 3,\n  "total": 10\n}')  # the JSON stays
    assert dev.http.delete(f"/jobs/{running['id']}").status_code == 202
    settled(dev, running["id"], "cancelled")


PROGRESS_SHAPES: list[tuple[Any, str | None]] = [
    (0.3, "30%"),
    (0, "0%"),
    (1, "100%"),
    ({"done": 3, "total": 10}, "30% (3 of 10)"),
    ({"current": 1, "total": 3}, "33% (1 of 3)"),
    ({"done": 29, "of": 100}, "29% (29 of 100)"),  # the shape docs/handlers.md's example reports
    ({"percent": 42.5}, "42%"),
    ({"done": 999, "total": 1000}, "99% (999 of 1000)"),  # 100% only when it is all done
    (1.5, None),
    ({"done": 11, "total": 10}, None),
    ({"done": 1, "total": 0}, None),
    ({"percent": 120}, None),
    ({"sleptMs": 500, "of": 1000}, None),
    ({"done": "3", "total": 10}, None),
    ("half", None),
    (True, None),
    ([3, 10], None),
    (None, None),
]


def call_in_console(dev: Dev, page: Page, module: str, function: str, calls: list[list[Any]]) -> list[Any]:
    """What `function` of the console's module js/`module` returns for each list of arguments in `calls`, called
    in the browser (a DOM node: its text)."""
    page.goto(ui(dev, "/"))
    answers: list[Any] = page.evaluate(
        "async ([module, name, calls]) => { const f = (await import(`./js/${module}`))[name];"
        " return calls.map((args) => f(...args)).map((r) => (r instanceof Node ? r.textContent : r ?? null)); }",
        [module, function, calls],
    )
    return answers


def test_progress_shapes_that_make_a_bar(dev: Dev, tab: Tab) -> None:
    said = call_in_console(dev, tab[0], "progress.js", "progressShare", [[value] for value, _ in PROGRESS_SHAPES])
    assert [share and share["text"] for share in said] == [text for _, text in PROGRESS_SHAPES]


def test_a_refused_cancel_shows_the_api_error(dev: Dev, tab: Tab) -> None:
    page, errors = tab
    later = create(dev, "cancel", "later", scheduledAt=format_time(utc_now() + LATER))

    page.goto(ui(dev, f"/jobs/{later['id']}"))
    expect(page.locator("#cancel")).to_be_visible()
    assert dev.http.delete(f"/jobs/{later['id']}").status_code == 200  # someone else was quicker
    errors.expect("status of 409")
    page.locator("#cancel").click()
    page.locator("dialog#confirm").get_by_role("button", name="Cancel job").click()
    notice = page.locator("#notice")
    expect(notice).to_have_attribute("role", "alert")
    expect(notice).to_have_text(f"Cancel job refused: cannot cancel job {later['id']}: it is cancelled")
    expect(page.locator("#cancel")).to_have_count(0)  # the page re-read the job: nothing left to cancel


def test_cancel_from_the_job_page_after_confirming_and_not_before(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    later = create(dev, "cancel-ok", "later", scheduledAt=format_time(utc_now() + LATER))

    page.goto(ui(dev, f"/jobs/{later['id']}"))
    page.locator("#cancel").click()
    page.locator("dialog#confirm").get_by_role("button", name="Cancel", exact=True).click()
    expect(page.locator("dialog#confirm")).to_be_hidden()
    assert job(dev, later["id"])["status"] == "pending"

    page.locator("#cancel").click()
    page.locator("dialog#confirm").get_by_role("button", name="Cancel job").click()
    expect(page.locator('[data-field="status"]')).to_have_text("cancelled")
    assert job(dev, later["id"])["status"] == "cancelled"


def test_the_jobs_list_filters_and_pages_by_cursor(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    made = [create(dev, "paging", f"job-{n:02d}", scheduledAt=format_time(utc_now() + LATER)) for n in range(55)]
    newest_first = [j["id"] for j in reversed(made)]
    create(
        dev, "paging", "other-type", "log-message", scheduledAt=format_time(utc_now() + LATER), payload={"message": "x"}
    )

    page.goto(ui(dev, "/jobs?tenantId=paging&jobType=noop"))
    rows = page.locator("tbody tr")
    expect(rows).to_have_count(50)
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.jobId)") == newest_first[:50]
    screenshot(page, "jobs", full_page=False)

    page.get_by_role("link", name="Older →").click()
    expect(rows).to_have_count(5)
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.jobId)") == newest_first[50:]
    expect(page.get_by_role("link", name="Older →")).to_have_count(0)

    page.get_by_role("link", name="← Newer").click()
    expect(rows).to_have_count(50)
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.jobId)") == newest_first[:50]

    assert "fax" in page.locator("#filter-jobType option").all_inner_texts()  # every type GET /job-types lists
    page.locator("#filter-jobType").select_option("log-message")
    expect(rows).to_have_count(1)
    expect(page).to_have_url(re.compile(r"jobType=log-message"))
    page.locator("#filter-status").select_option("dlq")
    expect(page.locator("#empty")).to_be_visible()


def test_a_long_key_is_clipped_and_the_jobs_list_fits_the_screen(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    dead = dead_letter(dev, "long-key", "checkout-retry-7f3a9c2e-41b8-4d6f-9e21-b5c0d8a1f4e7-2026-12-06")
    key = dead["idempotencyKey"]
    assert len(key) >= 60
    create(dev, "long-key", "short")

    page.goto(ui(dev, "/jobs?tenantId=long-key"))
    row = page.locator(f'tr[data-job-id="{dead["id"]}"]')
    cell = row.locator("[data-key]")
    expect(cell).to_have_attribute("title", key)
    clipped = cell.evaluate("c => [getComputedStyle(c).textOverflow, c.scrollWidth > c.clientWidth]")
    assert clipped == ["ellipsis", True], "the key is not cut short with an ellipsis"
    expect(row.locator(".clamp")).to_contain_text("flaky failed on purpose")
    header = page.get_by_role("columnheader", name="Last error").bounding_box()
    assert header is not None
    assert header["x"] + header["width"] <= DESKTOP["width"], f"Last error ends at {header} on a 1280 px screen"
    width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"the page is {width[0]} px wide on a {width[1]} px screen"

    row.get_by_role("link", name=dead["id"]).click()
    expect(page.locator('[data-field="idempotencyKey"]')).to_have_text(key)


def test_a_template_links_to_its_runs_and_a_run_to_its_template(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    template = create(dev, "template", "every-second", interval="1s")
    wait_until(
        lambda: dev.http.get("/jobs", params={"tenantId": "template", "templateId": template["id"]}).json(), 30, "a run"
    )

    page.goto(ui(dev, f"/jobs/{template['id']}"))
    expect(page.locator('[data-field="interval"]')).to_have_text("1s · every second")
    run_link = page.locator("section", has_text="Runs").locator("tbody tr a").first
    expect(run_link).to_be_visible()
    run_link.click()
    expect(page.locator("h1")).to_contain_text("Job")
    page.locator('[data-field="templateId"] a').click()
    expect(page.locator("h1")).to_contain_text(f"Template {template['id']}")
    assert dev.http.delete(f"/jobs/{template['id']}").status_code == 200


def test_a_waiting_job_links_the_jobs_it_waits_for_and_is_cancelled_from_its_page(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    first = create(dev, "waits", "first", scheduledAt=format_time(utc_now() + LATER))
    second = create(dev, "waits", "second", scheduledAt=format_time(utc_now() + LATER))
    waiting = create(dev, "waits", "after-both", dependsOn=[first["id"], second["id"]])

    page.goto(ui(dev, f"/jobs/{waiting['id']}"))
    expect(page.locator('[data-field="status"]')).to_have_text("waiting")
    expect(page.locator('[data-field="dependsOn"] a')).to_have_text([first["id"], second["id"]])
    page.locator("#cancel").click()
    page.locator("dialog#confirm").get_by_role("button", name="Cancel job").click()
    expect(page.locator('[data-field="status"]')).to_have_text("cancelled")
    page.locator('[data-field="dependsOn"] a').first.click()
    expect(page.locator("h1")).to_contain_text(f"Job {first['id']}")
    assert job(dev, first["id"])["status"] == "pending"  # a dependent's cancel leaves its parents alone


def workflow(dev: Dev, tenant: str, key: str, steps: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    response = dev.http.post("/workflows", json={"idempotencyKey": key, "tenantId": tenant, "steps": steps, **fields})
    assert response.status_code == 201, response.text
    made: dict[str, Any] = response.json()
    return made


def test_a_workflow_is_drawn_as_a_graph_of_its_steps_and_cancelled_from_its_page(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    steps: list[dict[str, Any]] = [
        {"name": "extract", "jobType": "noop"},
        {"name": "orders", "jobType": "noop", "after": ["extract"]},
        {"name": "refunds", "jobType": "flaky", "payload": {"failRate": 1}, "maxAttempts": 1, "after": ["extract"]},
        {"name": "load", "jobType": "noop", "after": ["orders", "refunds"]},
        {"name": "report", "jobType": "noop", "after": ["load"], "onParentFailure": "run"},
    ]
    failing = workflow(dev, "flows", "nightly-0612", steps, name="nightly-etl")
    wait_until(
        lambda: dev.http.get(f"/workflows/{failing['id']}").json()["status"] == "failed", 60, "the workflow to fail"
    )
    later = workflow(dev, "flows", "next-week", steps[:2], scheduledAt=format_time(utc_now() + LATER))

    page.goto(ui(dev, "/workflows?tenantId=flows"))
    expect(page.locator("tbody tr")).to_have_count(2)
    expect(page.locator(f'tr[data-workflow-id="{failing["id"]}"] .badge')).to_have_text("failed")
    page.get_by_role("link", name="nightly-etl").click()
    expect(page.locator("h1")).to_contain_text("Workflow nightly-etl failed")
    graph = page.locator(".graph svg")
    expect(graph.locator("a[data-step]")).to_have_count(5)
    expected = {"extract": "completed", "orders": "completed", "refunds": "dlq", "load": "cancelled"}
    for name, status in expected.items():
        expect(graph.locator(f'a[data-step="{name}"] rect')).to_have_class(f"node {status}")
    expect(graph.locator('a[data-step="report"] rect')).to_have_class("node completed")  # it runs anyway
    expect(graph.locator("path.edge")).to_have_count(5)
    boxes = {name: graph.locator(f'a[data-step="{name}"] rect').bounding_box() for name in ("extract", "load")}
    assert boxes["extract"] is not None
    assert boxes["load"] is not None
    assert boxes["extract"]["x"] < boxes["load"]["x"]  # parents left of their steps
    expect(page.locator("#cancel-workflow")).to_have_count(0)  # finished: nothing to cancel
    screenshot(page, "workflow")
    graph.locator('a[data-step="refunds"]').click()
    expect(page.locator("h1")).to_contain_text("Job ")
    expect(page.locator('[data-field="workflowId"] a')).to_have_text(failing["id"])

    page.goto(ui(dev, f"/workflows/{later['id']}"))
    expect(page.locator("h1")).to_contain_text("running")
    page.locator("#cancel-workflow").click()
    page.locator("dialog#confirm").get_by_role("button", name="Cancel workflow").click()
    expect(page.locator("h1")).to_contain_text("cancelled")
    expect(page.locator("td .badge")).to_have_text(["cancelled", "cancelled"])


def test_the_batches_pages_show_each_batchs_progress_and_members(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    body = {
        "idempotencyKey": "december",
        "tenantId": "batches",
        "name": "December invoices",
        "onComplete": {"jobType": "noop"},
    }
    made = dev.http.post("/batches", json=body)
    assert made.status_code == 201, made.text
    batch = made.json()
    members = [
        {
            "idempotencyKey": f"invoice-{n}",
            "jobType": "noop",
            "scheduledAt": format_time(utc_now() + (LATER if n else timedelta(0))),
        }
        for n in range(4)
    ]
    assert dev.http.post(f"/batches/{batch['id']}/jobs", json={"jobs": members}).status_code == 200
    wait_until(lambda: dev.http.get(f"/batches/{batch['id']}").json()["counts"].get("completed") == 1, 60, "one member")

    page.goto(ui(dev, "/batches?tenantId=batches"))
    row = page.locator(f'tr[data-batch-id="{batch["id"]}"]')
    expect(row.locator(".badge")).to_have_text("open")
    expect(row.locator("progress")).to_have_attribute("aria-valuetext", "25% (1 of 4)")
    expect(row.locator("td[data-counts]")).to_have_text("1 completed, 3 pending")
    screenshot(page, "batches")
    row.get_by_role("link", name="December invoices").click()
    expect(page.locator("h1")).to_have_text("Batch December invoices open")
    expect(page.locator('[data-field="members"]')).to_have_text("4: 1 completed, 3 pending")
    expect(page.locator("tr[data-member] .badge")).to_have_text(["completed", "pending", "pending", "pending"])
    page.locator("#member-status").select_option("completed")
    expect(page.locator("tr[data-member]")).to_have_count(1)
    completed = page.locator("tr[data-member]").get_attribute("data-member")
    assert dev.http.get(f"/jobs/{completed}").json()["status"] == "completed"
    screenshot(page, "batch")
    page.locator('[data-field="callbacks"]').get_by_role("link", name="onComplete").click()
    expect(page.locator('[data-field="callbackOf"] code')).to_have_text(batch["id"])
    page.locator('[data-field="callbackOf"] a').click()  # back to its batch
    expect(page.locator('[data-field="id"] code')).to_have_text(batch["id"])


def test_the_schedules_page_lists_templates_with_their_schedule_in_words(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    nightly = create(dev, "schedules", "nightly", cron="0 2 * * *", timezone="Europe/Berlin")
    often = create(dev, "schedules", "often", interval="5m")
    create(dev, "schedules", "one-off", scheduledAt=format_time(utc_now() + LATER))

    page.goto(ui(dev, "/schedules?tenantId=schedules"))
    expect(page.locator("tbody tr")).to_have_count(2)
    row = page.locator(f'tr[data-job-id="{nightly["id"]}"]')
    expect(row.locator("td[data-words]")).to_have_text("every day at 02:00 (Europe/Berlin)")
    expect(row.locator("time").first).to_have_attribute("datetime", nightly["scheduledAt"])
    expect(page.locator(f'tr[data-job-id="{often["id"]}"] td[data-words]')).to_have_text("every 5 minutes")
    row.get_by_role("link", name="schedules-nightly").click()
    expect(page.locator("h1")).to_contain_text(f"Template {nightly['id']}")


def test_a_declared_schedule_says_where_it_is_declared(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    body = {"idempotencyKey": "from-file", "jobType": "noop", "interval": "1h"}
    applied = dev.http.post("/schedules/apply", json={"tenantId": "declared", "schedules": [body]})
    assert applied.status_code == 200, applied.text
    made = create(dev, "declared", "by-hand", interval="2h")

    page.goto(ui(dev, "/schedules?tenantId=declared"))
    expect(page.locator("tbody tr")).to_have_count(2)
    expect(page.locator("[data-declared]")).to_have_count(1)
    expect(page.locator("[data-declared]")).to_have_text("declared in a file")
    expect(page.locator(f'tr[data-job-id="{made["id"]}"] [data-declared]')).to_have_count(0)


def in_zone(iso: str, zone: str) -> str:
    """What the console shows of a fire time in `zone`: the zone's date and time, UTC beside it."""
    utc = datetime.fromisoformat(iso)
    local = utc.astimezone(ZoneInfo(zone))
    clock = "%H:%M:%S" if utc.second else "%H:%M"
    in_utc = utc.strftime(clock if local.date() == utc.date() else f"%Y-%m-%d {clock}")
    return f"{local.strftime(f'%Y-%m-%d {clock}')} {zone} ({in_utc} UTC)"


def test_fire_times_are_shown_in_the_templates_own_zone_with_utc_beside(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    paris = create(dev, "zones", "paris", cron="0 2 * * *", timezone="Europe/Paris")
    new_york = create(dev, "zones", "new-york", cron="30 22 * * *", timezone="America/New_York")  # the next day in UTC
    plain = create(dev, "zones", "plain", cron="0 4 * * *")
    upcoming = {t["id"]: dev.http.get(f"/jobs/{t['id']}/upcoming?count=5").json() for t in (paris, new_york, plain)}

    page.goto(ui(dev, "/schedules?tenantId=zones"))
    shown = page.locator(f'[data-fire-times="{paris["id"]}"] time')
    expect(shown).to_have_text([in_zone(t, "Europe/Paris") for t in upcoming[paris["id"]]])
    expect(shown.first).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d 02:00 Europe/Paris \(0[01]:00 UTC\)$"))
    shown = page.locator(f'[data-fire-times="{new_york["id"]}"] time')
    expect(shown).to_have_text([in_zone(t, "America/New_York") for t in upcoming[new_york["id"]]])
    expect(shown.first).to_have_text(re.compile(r"^\S+ 22:30 America/New_York \(\d{4}-\d\d-\d\d 0[23]:30 UTC\)$"))
    shown = page.locator(f'[data-fire-times="{plain["id"]}"] time')  # no zone (the API says UTC): UTC alone
    expect(shown).to_have_text([f"{t[:10]} {t[11:16]} UTC" for t in upcoming[plain["id"]]])

    run = dev.http.post(f"/jobs/{paris['id']}/trigger", json={}).json()
    page.goto(ui(dev, f"/jobs/{paris['id']}"))
    expect(page.locator("section.schedule time")).to_have_text(
        [in_zone(t, "Europe/Paris") for t in upcoming[paris["id"]]]
    )
    expect(page.locator('[data-field="scheduledAt"]')).to_have_text(
        in_zone(job(dev, paris["id"])["scheduledAt"], "Europe/Paris")
    )
    expect(page.locator('[data-field="createdAt"]')).to_have_text(re.compile(r" UTC$"))  # not a fire time
    planned = page.locator("section", has_text="Runs").locator("tbody time")
    expect(planned).to_have_text([in_zone(run["scheduledAt"], "Europe/Paris")])


TIMES_IN_ZONES: list[tuple[str, str | None, str]] = [
    ("2026-12-06T01:00:00Z", "Europe/Paris", "2026-12-06 02:00 Europe/Paris (01:00 UTC)"),
    ("2026-07-06T00:00:00Z", "Europe/Paris", "2026-07-06 02:00 Europe/Paris (00:00 UTC)"),  # summer time
    ("2026-12-06T03:30:00Z", "America/New_York", "2026-12-05 22:30 America/New_York (2026-12-06 03:30 UTC)"),
    ("2026-12-06T01:00:15.250Z", "Asia/Kolkata", "2026-12-06 06:30:15 Asia/Kolkata (01:00:15 UTC)"),
    ("2026-12-06T01:00:00Z", "UTC", "2026-12-06 01:00 UTC"),
    ("2026-12-06T01:00:00Z", None, "2026-12-06 01:00 UTC"),
    ("2026-12-06T01:00:07Z", "Etc/UTC", "2026-12-06 01:00:07 UTC"),
    ("2026-12-06T01:00:00Z", "Nowhere/Atlantis", "2026-12-06 01:00 UTC"),  # a zone the browser does not know
]


def test_times_in_a_zone(dev: Dev, tab: Tab) -> None:
    said = call_in_console(dev, tab[0], "ui.js", "zonedTime", [[iso, zone] for iso, zone, _ in TIMES_IN_ZONES])
    assert said == [text for _, _, text in TIMES_IN_ZONES]


def fire_times(page: Page, template_id: str) -> list[str]:
    times = page.locator(f'[data-fire-times="{template_id}"] time')
    expect(times).to_have_count(5)
    return [str(t) for t in times.evaluate_all("ts => ts.map(t => t.getAttribute('datetime'))")]


def test_a_schedule_is_paused_and_resumed_from_the_schedules_page(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    nightly = create(dev, "schedule-actions", "nightly", cron="0 3 * * *", timezone="Europe/Berlin", overlap="skip")
    often = create(dev, "schedule-actions", "often", interval="15m")

    page.goto(ui(dev, "/schedules?tenantId=schedule-actions"))
    row = page.locator(f'tr[data-job-id="{nightly["id"]}"]')
    shown = fire_times(page, nightly["id"])
    upcoming = dev.http.get(f"/jobs/{nightly['id']}/upcoming", params={"count": 5}).json()
    preview = dev.http.get(
        "/schedules/preview", params={"cron": "0 3 * * *", "timezone": "Europe/Berlin", "count": 5}
    ).json()
    assert shown == upcoming == preview
    assert fire_times(page, often["id"]) == dev.http.get(f"/jobs/{often['id']}/upcoming?count=5").json()
    expect(row.locator("td[data-overlap]")).to_have_text("skip")
    expect(page.locator(f'tr[data-job-id="{often["id"]}"] td[data-overlap]')).to_have_text("allow_all")

    row.get_by_role("button", name="Pause").click()
    dialog = page.locator("dialog#confirm")
    expect(dialog).to_contain_text("Pause template schedule-actions-nightly?")
    dialog.get_by_label("Note (optional): why").fill("upstream maintenance until Friday")
    with page.expect_response(re.compile(rf"/jobs/{nightly['id']}/pause$")) as answer:
        dialog.get_by_role("button", name="Pause").click()
    assert answer.value.status == 200
    paused = job(dev, nightly["id"])
    assert paused["paused"] is True
    assert paused["pauseNote"] == "upstream maintenance until Friday"
    expect(row.locator("td[data-state]")).to_contain_text("paused")
    expect(row.locator("[data-pause-note]")).to_have_text("upstream maintenance until Friday")
    expect(row.locator(f'[data-fire-times="{nightly["id"]}"]')).to_have_text("none while paused")
    expect(row.get_by_role("button", name="Resume")).to_be_visible()
    screenshot(page, "schedules")

    row.get_by_role("button", name="Resume").click()
    with page.expect_response(re.compile(rf"/jobs/{nightly['id']}/resume$")) as answer:
        dialog.get_by_role("button", name="Resume").click()
    assert answer.value.status == 200
    resumed = job(dev, nightly["id"])
    assert resumed["paused"] is False
    assert "pauseNote" not in resumed
    expect(row.get_by_role("button", name="Pause")).to_be_visible()
    assert fire_times(page, nightly["id"]) == dev.http.get(f"/jobs/{nightly['id']}/upcoming?count=5").json()


def test_the_template_page_triggers_backfills_and_shows_a_refused_backfill(dev: Dev, tab: Tab) -> None:
    page, errors = tab
    template = create(dev, "template-actions", "nightly", cron="0 3 * * *")
    page.goto(ui(dev, f"/jobs/{template['id']}"))
    schedule = page.locator("section.schedule")
    expect(schedule.locator("[data-words]")).to_have_text("every day at 03:00 (UTC)")
    expect(schedule.locator("[data-overlap]")).to_have_text("allow_all")
    assert fire_times(page, template["id"]) == dev.http.get(f"/jobs/{template['id']}/upcoming?count=5").json()

    dialog = page.locator("dialog#confirm")
    page.get_by_role("button", name="Trigger now").click()
    with page.expect_response(re.compile(r"/trigger$")) as answer:
        dialog.get_by_role("button", name="Trigger").click()
    run = answer.value.json()
    assert answer.value.status == 201
    assert run["templateId"] == template["id"]
    expect(page.locator("#notice")).to_have_text(re.compile(f"Triggered: run {run['id']}"))
    expect(page.locator("section", has_text="Runs").locator(f'a[href="#/jobs/{run["id"]}"]')).to_be_visible()

    errors.expect("status of 400")
    page.locator("#backfill-from").fill("2026-03-05T00:00")
    page.locator("#backfill-to").fill("2026-03-01T00:00")
    page.get_by_role("button", name="Backfill", exact=True).click()
    with page.expect_response(re.compile(r"/backfill$")) as answer:
        dialog.get_by_role("button", name="Backfill").click()
    assert answer.value.status == 400
    notice = page.locator("#notice")
    expect(notice).to_have_attribute("role", "alert")
    expect(notice).to_have_text(f"Backfill refused: {answer.value.json()['error']}")
    assert "'to' must be after 'from'" in answer.value.json()["error"]

    page.locator("#backfill-from").fill("2026-03-01T00:00")
    page.locator("#backfill-to").fill("2026-03-04T00:00")
    page.get_by_role("button", name="Backfill", exact=True).click()
    with page.expect_response(re.compile(r"/backfill$")) as answer:
        dialog.get_by_role("button", name="Backfill").click()
    assert answer.value.json() == {"spawned": 3, "existing": 0, "skipped": 0}
    expect(notice).to_have_text("Backfilled: 3 runs created, 0 existed already, 0 skipped.")
    planned = {r.get("plannedAt") for r in dev.http.get(f"/jobs/{template['id']}/runs").json()}
    assert {"2026-03-01T03:00:00Z", "2026-03-02T03:00:00Z", "2026-03-03T03:00:00Z"} <= planned
    screenshot(page, "template")


@pytest.mark.parametrize(
    ("schedule", "words"),
    [
        ({"cron": "*/15 * * * *"}, "every 15 minutes"),
        ({"cron": "30 * * * *"}, "every hour at minute 30"),
        ({"cron": "0 9 * * 1-5"}, "every weekday at 09:00 (UTC)"),
        ({"cron": "0 6 * * 0", "timezone": "America/New_York"}, "every Sunday at 06:00 (America/New_York)"),
        ({"cron": "15 3 1 * *"}, "on day 1 of every month at 03:15 (UTC)"),
        ({"cron": "@hourly"}, "every hour"),
        ({"cron": "@daily"}, "every day at 00:00 (UTC)"),
        ({"cron": "0 0 1,15 * *"}, None),
        ({"interval": "1h30m"}, "every 1 hour 30 minutes"),
        ({"interval": "1s"}, "every second"),
    ],
)
def test_schedules_in_words(dev: Dev, tab: Tab, schedule: dict[str, str], words: str | None) -> None:
    page, _ = tab
    page.goto(ui(dev, "/"))
    said = page.evaluate("async (job) => (await import('./js/schedule-words.js')).scheduleInWords(job)", schedule)
    assert said == words


def tab_to(page: Page, what: str, value: str, presses: int = 30) -> None:
    """Press Tab until the focused element's `what` (a JavaScript expression on it) is `value`."""
    for _ in range(presses):
        page.keyboard.press("Tab")
        if page.evaluate(f"document.activeElement.{what}") == value:
            return
    raise AssertionError(f"Tab never reached the element whose {what} is {value!r}")


def test_keyboard_alone_reaches_and_takes_an_action(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    dead = dead_letter(dev, "keyboard", "dead")

    page.goto(ui(dev, f"/jobs/{dead['id']}"))
    expect(page.locator("#redrive")).to_be_visible()
    tab_to(page, "id", "redrive")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none", "the focused button shows no focus ring"

    page.keyboard.press("Enter")
    expect(page.locator("dialog#confirm")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("dialog#confirm")).to_be_hidden()
    assert job(dev, dead["id"])["attemptBase"] == 0  # Escape took nothing

    page.locator("#redrive").focus()
    page.keyboard.press("Enter")
    expect(page.locator("dialog#confirm")).to_be_visible()
    expect(page.locator("#confirm-ok")).to_be_focused()  # the dialog opens with Confirm focused
    page.keyboard.press("Enter")
    # What Enter did, in order: the dialog closed, the job was re-driven (a fresh budget: attemptBase 1; its
    # status may already be dlq again, as its handler always fails), the page says so. Read from the dialog, the
    # API and the notice rather than from one response event, which CI runs under load waited 30 s for twice.
    expect(page.locator("dialog#confirm")).to_be_hidden()
    wait_until(lambda: job(dev, dead["id"])["attemptBase"] == 1, 60, "the job to be re-driven")
    expect(page.locator("#notice")).to_have_text(re.compile("Re-driven"))


def test_keyboard_alone_pauses_a_template_with_a_note(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    template = create(dev, "keyboard", "nightly", cron="0 1 * * *")

    page.goto(ui(dev, f"/jobs/{template['id']}"))
    expect(page.locator("section.schedule time")).to_have_count(5)
    tab_to(page, "dataset.action", "pause")
    page.keyboard.press("Enter")
    expect(page.locator("dialog#confirm")).to_be_visible()
    assert page.evaluate("document.activeElement.id") == "confirm-input"  # the note's field has the focus
    page.keyboard.type("disk full")
    with page.expect_response(re.compile(r"/pause$")) as answer:
        page.keyboard.press("Enter")  # Enter in the field confirms
    assert answer.value.status == 200
    paused = job(dev, template["id"])
    assert (paused["paused"], paused["pauseNote"]) == (True, "disk full")
    expect(page.locator("section.schedule [data-pause-note]")).to_have_text("disk full")
    # The page was redrawn under the focus: the keyboard goes on from the page's content, to Resume.
    expect(page.locator("main#view")).to_be_focused()
    tab_to(page, "dataset.action", "resume", presses=10)


PHONE_SCREENSHOTS = {"/": "phone-overview", "/jobs/{id}": "phone-job", "/schedules?tenantId=phone": "phone-schedules"}


@pytest.mark.parametrize(
    "route", ["/", "/jobs?tenantId=phone", "/dlq", "/jobs/{id}", "/schedules?tenantId=phone", "/jobs/{template}"]
)
def test_every_page_fits_a_phone(dev: Dev, browser: Browser, route: str) -> None:
    name = re.sub(r"[^a-z]+", "-", route.split("?")[0]).strip("-") or "home"
    dead = dead_letter(dev, "phone", f"dead-{name}")
    template = create(dev, "phone", f"template-{name}", cron="0 5 * * *", overlap="buffer_one")
    page, errors = browser.open(PHONE)
    page.goto(ui(dev, route.replace("{id}", dead["id"]).replace("{template}", template["id"])))
    expect(page.locator("h1")).to_be_visible()
    expect(page.locator("nav").get_by_role("link", name="Dead letters")).to_be_visible()
    page.wait_for_load_state("networkidle")
    width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"the page is {width[0]} px wide on a {width[1]} px screen"
    if route in PHONE_SCREENSHOTS:  # the list of schedules as far as the screen shows it
        screenshot(page, PHONE_SCREENSHOTS[route], full_page=not route.startswith("/schedules"))
    page.close()
    assert errors.unexpected() == []


def test_the_console_loads_nothing_from_elsewhere(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    page.goto(ui(dev, "/"))
    expect(page.locator("h1")).to_have_text("Overview")
    origin = f"http://127.0.0.1:{dev.port}/"
    assert requested
    assert [url for url in requested if not url.startswith(origin)] == []
    response = dev.http.get("/ui/")
    assert "default-src 'self'" in response.headers["content-security-policy"]
    assert dev.http.get("/ui").headers["location"] == "ui/"  # relative: never the Host a client sent
    page.goto(f"{origin}ui")
    expect(page.locator("h1")).to_have_text("Overview")
    assert page.url.startswith(f"{origin}ui/")


def test_an_unknown_console_page_says_so(dev: Dev, tab: Tab) -> None:
    page, _ = tab
    page.goto(ui(dev, "/nowhere"))
    expect(page.locator("h1")).to_have_text("Not found")


# --- with AUTH=required ------------------------------------------------------------------------------------


class SecuredDev:
    """A `jobsched dev` with AUTH=required, keys made with `jobsched keys` on its file before it starts."""

    def __init__(self, dev: Dev) -> None:
        self.dev = dev
        self.keys = {
            (tenant, role): keys("create", "--tenant", tenant, "--role", role, "--sqlite", str(dev.db)).stdout.strip()
            for tenant, role in (("acme", "reader"), ("acme", "writer"), ("globex", "writer"), ("ops", "admin"))
        }
        dev.start(AUTH="required")

    def create(self, tenant: str, key: str, **fields: Any) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self.keys[(tenant, 'writer')]}"}
        body = {"idempotencyKey": key, "jobType": "noop", **fields}
        if "cron" not in body and "interval" not in body:
            body.setdefault("scheduledAt", format_time(utc_now()))
        response = self.dev.http.post("/jobs", json=body, headers=headers)
        assert response.status_code == 201, response.text
        made: dict[str, Any] = response.json()
        return made

    def status(self, tenant: str, job_id: str) -> str:
        headers = {"Authorization": f"Bearer {self.keys[(tenant, 'writer')]}"}
        return str(self.dev.http.get(f"/jobs/{job_id}", headers=headers).json()["status"])


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredDev]:
    made = Dev(tmp_path_factory.mktemp("console-secured"))
    yield SecuredDev(made)
    for process in made.runs:
        process.stop()
    made.http.close()


def sign_in(page: Page, errors: ConsoleErrors, secured: SecuredDev, route: str, key: str) -> None:
    errors.expect("status of 401")  # the console's first call, before it has a key
    page.goto(ui(secured.dev, route))
    expect(page.locator("h1")).to_have_text("API key needed")
    page.locator("#api-key").fill(key)
    page.get_by_role("button", name="Use this key").click()


def dead_of(secured: SecuredDev, tenant: str, key: str) -> dict[str, Any]:
    made = secured.create(tenant, key, jobType="flaky", payload={"failRate": 1}, maxAttempts=1)
    wait_until(lambda: secured.status(tenant, made["id"]) == "dlq", 60, "the job to be dead-lettered")
    return made


def test_a_reader_key_sees_its_tenant_and_no_action(secured: SecuredDev, tab: Tab) -> None:
    page, errors = tab
    dead = dead_of(secured, "acme", "reader-sees")
    sign_in(page, errors, secured, f"/jobs/{dead['id']}", secured.keys[("acme", "reader")])
    expect(page.locator("h1")).to_contain_text(f"Job {dead['id']}")
    expect(page.locator("#whoami")).to_have_text("acme · reader")
    expect(page.locator("#banner")).to_be_hidden()
    expect(page.locator('[data-field="lastError"]')).to_contain_text("flaky failed on purpose")
    expect(page.get_by_role("button")).to_have_count(1)  # Forget key; nothing that changes a job
    screenshot(page, "reader-job")

    page.goto(ui(secured.dev, "/dlq"))
    expect(page.locator(f'tr[data-job-id="{dead["id"]}"]')).to_be_visible()
    expect(page.get_by_role("button", name=re.compile("Re-drive"))).to_have_count(0)
    expect(page.locator("input[type=checkbox]")).to_have_count(0)
    expect(page.locator("#tenant option")).to_have_text(["acme"])


def history_dlq(secured: SecuredDev, key: str, tenant: str) -> int:
    """The dead letters of the last hour GET /history gives `key` for `tenant` (blank: every tenant)."""
    answer = secured.dev.http.get(f"/history?tenantId={tenant}", headers={"Authorization": f"Bearer {key}"})
    assert answer.status_code == 200, answer.text
    return sum(answer.json()["dlq"])


def test_history_shows_a_keys_tenant_and_an_admin_every_tenant(secured: SecuredDev, browser: Browser) -> None:
    dead_of(secured, "acme", "history-acme")
    dead_of(secured, "globex", "history-globex")
    reader, admin = secured.keys[("acme", "reader")], secured.keys[("ops", "admin")]
    own, every = history_dlq(secured, reader, "acme"), history_dlq(secured, admin, "")
    assert 1 <= own < every
    for key, options, dlq in ((reader, ["acme"], own), (admin, ["All tenants", "acme", "globex"], every)):
        page, errors = browser.open(DESKTOP)
        sign_in(page, errors, secured, "/history", key)
        expect(page.locator('.legend [data-series="dlq"]')).to_have_text(f"dead-lettered ({dlq})")
        expect(page.locator("#tenant option")).to_have_text(options)
        page.close()
        assert errors.unexpected() == [], "errors in the browser console"


def test_a_reader_key_sees_schedules_and_no_schedule_action(secured: SecuredDev, tab: Tab) -> None:
    page, errors = tab
    template = secured.create("acme", "reader-schedule", cron="0 4 * * *")
    sign_in(page, errors, secured, "/schedules", secured.keys[("acme", "reader")])
    row = page.locator(f'tr[data-job-id="{template["id"]}"]')
    expect(row.locator("td[data-words]")).to_have_text("every day at 04:00 (UTC)")
    expect(row.locator("time")).to_have_count(5)
    expect(page.get_by_role("button")).to_have_count(1)  # Forget key
    expect(page.get_by_role("columnheader", name="Actions")).to_have_count(0)

    row.get_by_role("link", name="reader-schedule").click()
    expect(page.locator("h1")).to_contain_text(f"Template {template['id']}")
    expect(page.locator("section.schedule time")).to_have_count(5)
    expect(page.get_by_role("button")).to_have_count(1)
    expect(page.locator("form.backfill")).to_have_count(0)


def test_a_writer_key_of_the_same_tenant_gets_the_actions(secured: SecuredDev, tab: Tab) -> None:
    page, errors = tab
    dead = dead_of(secured, "acme", "writer-acts")
    sign_in(page, errors, secured, f"/jobs/{dead['id']}", secured.keys[("acme", "writer")])
    expect(page.locator("#whoami")).to_have_text("acme · writer")
    with page.expect_response(re.compile(r"/retry$")) as answer:
        page.locator("#redrive").click()
        page.locator("dialog#confirm").get_by_role("button", name="Re-drive").click()
    assert answer.value.json()["status"] == "pending"


def test_another_tenants_job_is_not_found(secured: SecuredDev, tab: Tab) -> None:
    page, errors = tab
    theirs = secured.create("globex", "not-yours", scheduledAt=format_time(utc_now() + LATER))
    errors.expect("status of 404")
    sign_in(page, errors, secured, f"/jobs/{theirs['id']}", secured.keys[("acme", "writer")])
    expect(page.locator("h1")).to_have_text("Could not load this page")
    expect(page.locator("[role=alert]")).to_have_text(f"job {theirs['id']} not found")
    page.goto(ui(secured.dev, "/jobs"))
    expect(page.locator(f'tr[data-job-id="{theirs["id"]}"]')).to_have_count(0)


def test_the_key_lives_in_this_tab_only_and_can_be_forgotten(secured: SecuredDev, browser: Browser) -> None:
    page, errors = browser.open(DESKTOP)
    key = secured.keys[("acme", "reader")]
    sign_in(page, errors, secured, "/", key)
    expect(page.locator("h1")).to_have_text("Overview")
    assert page.evaluate("sessionStorage.getItem('jobsched.apiKey')") == key
    assert page.evaluate("localStorage.length") == 0
    assert page.context.cookies() == []

    other, other_errors = browser.open(DESKTOP)
    other_errors.expect("status of 401")
    other.goto(ui(secured.dev, "/"))
    expect(other.locator("h1")).to_have_text("API key needed")  # a new tab has no key

    page.get_by_role("button", name="Forget key").click()
    expect(page.locator("h1")).to_have_text("API key needed")
    assert page.evaluate("sessionStorage.getItem('jobsched.apiKey')") is None
    for tab_page, tab_errors in ((page, errors), (other, other_errors)):
        tab_page.close()
        assert tab_errors.unexpected() == []
