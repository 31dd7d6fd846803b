"""Schedules in `jobsched dev` (SQLite, in-process bus), driven through the API only: overlap policies with
handlers longer than the interval, runs left, pause on failure, trigger and cancel_other, pause and resume,
and catch-up after downtime."""

from __future__ import annotations

import itertools
import threading
from datetime import timedelta

import httpx2 as httpx
import pytest

from shared.model import parse_time, utc_now
from shared.store.sqlite import SqliteJobStore
from tests.e2e.devmode import Dev
from tests.schedule_support import (
    assert_never_overlapped,
    assert_one_run_per_planned_time,
    attempt_spans,
    count,
    create_template,
    runs,
)
from tests.support import wait_until

SLOW = {"jobType": "slow", "interval": "1s"}
MINUTE = timedelta(minutes=1)


def ticks(dev: Dev) -> float:
    return dev.runs[-1].metric("scheduler_tick_duration_seconds_count") or 0.0


def wait_ticks(dev: Dev, n: int) -> None:
    """Let the scheduler tick n more times (a signal from the process, not a sleep)."""
    target = ticks(dev) + n
    wait_until(lambda: ticks(dev) >= target, 60, f"{n} scheduler ticks")


def test_overlap_policies_with_a_handler_longer_than_the_interval(dev: Dev, capsys: pytest.CaptureFixture[str]) -> None:
    process = dev.start()
    skip = create_template(dev.http, "skip", overlap="skip", payload={"sleepMs": 2500}, **SLOW)
    buffered = create_template(dev.http, "buffer-all", overlap="buffer_all", payload={"sleepMs": 1200}, **SLOW)
    one = create_template(dev.http, "buffer-one", overlap="buffer_one", payload={"sleepMs": 2500}, **SLOW)
    jittered = create_template(dev.http, "jitter", jobType="noop", interval="1s", jitter="800ms", remainingRuns=6)
    wait_until(lambda: count(dev.http, skip["id"], "completed") >= 2, 60, "two skip runs to complete")
    wait_until(lambda: count(dev.http, buffered["id"], "completed") >= 3, 60, "three buffer_all runs to complete")
    wait_until(lambda: count(dev.http, one["id"], "completed") >= 2, 60, "two buffer_one runs to complete")
    assert count(dev.http, buffered["id"], "buffered") >= 1  # fire times keep coming faster than runs end
    assert count(dev.http, one["id"], "buffered") <= 1
    for tpl in (skip, buffered, one):
        dev.http.post(f"/jobs/{tpl['id']}/pause", json={"note": "test over"})
    for tpl in (skip, buffered, one):
        assert_never_overlapped(attempt_spans(dev.http, tpl["id"]))
        assert_one_run_per_planned_time(runs(dev.http, tpl["id"]))
    # buffer_all runs start in planned order; measure how soon a buffered run follows the one before it.
    spans = attempt_spans(dev.http, buffered["id"])
    planned = {r["id"]: r["plannedAt"] for r in runs(dev.http, buffered["id"])}
    assert [planned[s[2]] for s in spans] == sorted(planned[s[2]] for s in spans)
    gaps = [(b[0] - a[1]).total_seconds() for a, b in itertools.pairwise(spans) if a[1] is not None]
    assert (process.metric('scheduler_schedule_actions_total{action="skipped"}') or 0) > 0
    assert (process.metric('scheduler_schedule_actions_total{action="buffered"}') or 0) > 0
    # remainingRuns: six runs, then the template completes; each run's jitter is inside [0, 800 ms).
    wait_until(lambda: dev.http.get(f"/jobs/{jittered['id']}").json()["status"] == "completed", 60, "the end")
    jitter_runs = runs(dev.http, jittered["id"])
    assert len(jitter_runs) == 6
    offsets = [parse_time(r["scheduledAt"]) - parse_time(r["plannedAt"]) for r in jitter_runs]
    assert all(timedelta(0) <= o < timedelta(milliseconds=800) for o in offsets)
    assert len(set(offsets)) > 1
    with capsys.disabled():
        print(f"\n[measure] buffer_all: previous run final → next run started: max {max(gaps):.3f}s (tick 0.1s)")


def test_pause_on_failure_trigger_cancel_other_pause_and_resume(dev: Dev) -> None:
    dev.start()
    failing = create_template(
        dev.http, "fails", jobType="flaky", interval="1s", payload={"failRate": 1}, maxAttempts=1, pauseOnFailure=True
    )
    wait_until(lambda: dev.http.get(f"/jobs/{failing['id']}").json()["paused"], 60, "the template to pause itself")
    paused = dev.http.get(f"/jobs/{failing['id']}").json()
    dead = [r for r in runs(dev.http, failing["id"]) if r["status"] == "dlq"]
    assert dead
    assert dead[0]["id"] in paused["pauseNote"]

    # trigger + cancel_other: the running run is asked to stop, and its executor stops it (the handler would
    # sleep for a minute); the new run waits until it has ended.
    manual = create_template(dev.http, "manual", jobType="slow", cron="0 0 1 1 *", overlap="cancel_other")
    first = dev.http.post(f"/jobs/{manual['id']}/trigger", json={"payload": {"sleepMs": 60_000}}).json()
    wait_until(lambda: dev.http.get(f"/jobs/{first['id']}").json()["status"] == "running", 30, "the first run")
    second = dev.http.post(f"/jobs/{manual['id']}/trigger", json={"payload": {"sleepMs": 10}})
    assert (second.status_code, second.json()["status"]) == (201, "buffered")
    assert dev.http.get(f"/jobs/{first['id']}").json()["cancelRequested"] is True
    wait_until(
        lambda: dev.http.get(f"/jobs/{second.json()['id']}").json()["status"] == "completed", 30, "the second run"
    )
    assert dev.http.get(f"/jobs/{first['id']}").json()["status"] == "cancelled"
    assert [e["outcome"] for e in dev.http.get(f"/jobs/{first['id']}/executions").json()] == ["cancelled"]
    assert_never_overlapped(attempt_spans(dev.http, manual["id"]))

    # pause: nothing spawns however long it stays paused; resume: the passed fire times never run.
    every = create_template(dev.http, "every", interval="1s")
    wait_until(lambda: runs(dev.http, every["id"]), 30, "a first run")
    dev.http.post(f"/jobs/{every['id']}/pause", json={"note": "hold"})
    held = len(runs(dev.http, every["id"]))
    wait_ticks(dev, 30)
    assert len(runs(dev.http, every["id"])) == held
    resumed_at = utc_now()
    resumed = dev.http.post(f"/jobs/{every['id']}/resume").json()
    assert parse_time(resumed["scheduledAt"]) > resumed_at
    wait_until(lambda: len(runs(dev.http, every["id"])) > held, 30, "a run after the resume")
    later = runs(dev.http, every["id"])[held:]
    assert all(parse_time(r["plannedAt"]) > resumed_at for r in later)


def test_catch_up_after_a_ten_minute_outage(dev: Dev) -> None:
    process = dev.start()
    templates = {
        name: create_template(dev.http, name, cron="* * * * *", catchup=catchup, **window)
        for name, catchup, window in (
            ("all", "all", {}),
            ("windowed", "all", {"catchupWindow": "5m"}),
            ("latest", "latest", {}),
            ("none", "none", {}),
        )
    }
    assert process.terminate() == 0
    # The outage: each template's next fire time is ten minutes in the past, as if no scheduler ran since.
    cursor = utc_now().replace(second=0, microsecond=0) - 10 * MINUTE
    store = SqliteJobStore(dev.db)
    for tpl in templates.values():
        stored = store.get(tpl["id"])
        assert stored is not None
        assert store.update_if_unmoved(stored, {"scheduledAt": cursor, "updatedAt": utc_now()}) is not None
    store.close()
    restarted = utc_now()
    dev.start()
    ids = [tpl["id"] for tpl in templates.values()]
    wait_until(lambda: all("lastFiredAt" in dev.http.get(f"/jobs/{i}").json() for i in ids), 30, "the catch-up")

    def planned(name: str) -> list[str]:
        return [r["plannedAt"] for r in runs(dev.http, templates[name]["id"])]

    # A minute may turn during the catch-up, or while this reads: its fire time then runs on time beside them.
    restart_minute = restarted.replace(second=0, microsecond=0)
    every = sorted(parse_time(p) for p in planned("all"))
    minutes = len(every)
    assert every == [cursor + i * MINUTE for i in range(minutes)]  # every missed time, each once
    assert every[-1] >= restart_minute
    windowed = [parse_time(p) for p in planned("windowed")]
    assert windowed
    assert all(p >= restarted - 5 * MINUTE - timedelta(seconds=1) for p in windowed)  # none older than 5m
    assert len(windowed) < minutes
    latest = sorted(parse_time(p) for p in planned("latest"))
    assert latest
    assert latest[0] >= restart_minute  # only the most recent missed time, none of the earlier ones
    assert all(parse_time(p) > restarted - timedelta(seconds=30) for p in planned("none"))  # no missed one ran
    assert (dev.runs[-1].metric('scheduler_schedule_actions_total{action="missed"}') or 0) >= 3 * (minutes - 6)


def test_a_backfill_near_the_limit_is_answered_whole_while_other_writes_go_on(dev: Dev) -> None:
    """The issue that found this: a backfill of thousands of fire times in `jobsched dev`, while jobs were
    being created, answered 503 after about a second with part of its runs written. Its runs are written in
    transactions that let the other writes through, and all of them are written."""
    dev.start()
    template = create_template(dev.http, "minutely", jobType="noop", cron="* * * * *")
    stop = threading.Event()

    def keep_creating(writer: int) -> None:  # other clients' creates, each a write of the one SQLite writer
        with httpx.Client(base_url=dev.base_url, timeout=30) as http:
            for i in itertools.count():
                if stop.is_set():
                    return
                body = {"idempotencyKey": f"other-{writer}-{i}", "tenantId": "other", "jobType": "noop", "payload": {}}
                assert http.post("/jobs", json={**body, "scheduledAt": "2099-01-01T00:00:00Z"}).status_code == 201

    writers = [threading.Thread(target=keep_creating, args=(w,)) for w in range(4)]
    for writer in writers:
        writer.start()
    try:
        whole = {"from": "2026-01-01T00:00:00Z", "to": "2026-01-07T22:39:00Z"}  # 9,999 fire times
        answer = dev.http.post(f"/jobs/{template['id']}/backfill", json=whole, timeout=120)
    finally:
        stop.set()
        for writer in writers:
            writer.join(60)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"spawned": 9999, "existing": 0, "skipped": 0}
    again = dev.http.post(f"/jobs/{template['id']}/backfill", json=whole, timeout=120)
    assert again.json() == {"spawned": 0, "existing": 9999, "skipped": 0}
