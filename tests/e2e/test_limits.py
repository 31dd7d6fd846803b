"""Limits through the whole product in one process (the embedded scheduler, executors and API on SQLite): the
handlers themselves see no more of their type running than its limits allow, starts keep to the start rate, and
an operator's limits, set through the API, replace the registered ones."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

import httpx2 as httpx
import pytest

from jobsched import HandlerContext, JobTypes, Limits, Rate
from jobsched.client import Client, Enqueued, Job, NotFound, TypeLimits
from jobsched.testing import embedded
from tests.support import wait_until

pytestmark = pytest.mark.e2e


class Sampler:
    """How many calls of a handler run at once, in all and per concurrency key, at most."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()

    @contextmanager
    def running(self, key: str) -> Iterator[None]:
        with self._lock:
            for name in ("*", key):
                self.now[name] += 1
                self.peak[name] = max(self.peak[name], self.now[name])
        try:
            yield
        finally:
            with self._lock:
                for name in ("*", key):
                    self.now[name] -= 1


def test_a_concurrency_limit_and_a_per_key_limit_hold_across_the_handlers_calls() -> None:
    sampler = Sampler()
    jobs = JobTypes()

    @jobs.handler("invoice", limits=Limits(concurrency=3, concurrency_per_key=1))
    def invoice(payload: dict[str, str], ctx: HandlerContext) -> None:
        with sampler.running(payload["customer"]):
            time.sleep(0.05)

    with embedded(jobs) as client:
        made = [
            client.create("invoice", {"customer": f"c{n % 5}"}, concurrency_key=f"c{n % 5}", tenant_id=f"t{n % 2}")
            for n in range(30)
        ]
        for job in made:
            assert client.wait(job.id, timeout=60).status == "completed"
    assert sampler.peak["*"] == 3  # reached, never passed
    # A key is its tenant's own: c0 of t0 and c0 of t1 may run together, so a key's peak over both is at most 2.
    assert all(sampler.peak[f"c{n}"] <= 2 for n in range(5))


def test_starts_keep_to_the_start_rate() -> None:
    jobs = JobTypes()

    @jobs.handler("metered", limits=Limits(rate=Rate(20, per=1.0)))
    def metered(payload: dict[str, int], ctx: HandlerContext) -> None:
        return None

    with embedded(jobs) as client:
        made = client.create_many("metered", [{"n": n} for n in range(50)])
        starts = sorted(t for times in attempt_starts(client, made) for t in times)
    assert len(starts) == 50
    # Counted from the attempts' start times: at most 20 in any second (the default burst of 1 spaces them 50 ms
    # apart), so the 50 starts span at least 49 intervals.
    second = timedelta(seconds=1)
    assert max(sum(1 for t in starts if first <= t < first + second) for first in starts) <= 20
    assert starts[-1] - starts[0] >= timedelta(seconds=49 / 20)


def test_each_concurrency_key_keeps_to_the_rate_per_key_and_keys_do_not_wait_for_each_other() -> None:
    jobs = JobTypes()

    @jobs.handler("per-customer", limits=Limits(rate_per_key=Rate(5, per=1.0)))
    def per_customer(payload: dict[str, str], ctx: HandlerContext) -> None:
        return None

    keys = ["c0", "c1", None] * 10
    with embedded(jobs) as client:
        made = [client.create("per-customer", {"customer": key or "-"}, concurrency_key=key) for key in keys]
        starts: dict[str | None, list[datetime]] = {}
        for key, times in zip(keys, attempt_starts(client, made), strict=True):
            starts.setdefault(key, []).extend(times)
    second = timedelta(seconds=1)
    for key in ("c0", "c1"):
        times = sorted(starts[key])
        assert len(times) == 10
        # Counted from the attempts' start times: at most 5 of a key in any second, 0.2 s apart.
        assert max(sum(1 for t in times if first <= t < first + second) for first in times) <= 5
        assert times[-1] - times[0] >= timedelta(seconds=9 / 5)
    # The keys are paced side by side, not one after the other; jobs without a key are not paced at all.
    assert min(starts["c1"]) < max(starts["c0"])
    assert min(starts["c0"]) < max(starts["c1"])
    unkeyed = sorted(starts[None])
    assert unkeyed[-1] - unkeyed[0] < timedelta(seconds=9 / 5)


def test_an_operator_sets_and_clears_a_types_limits_through_the_api() -> None:
    jobs = JobTypes()

    @jobs.handler("reports", limits=Limits(concurrency=4))
    def reports(payload: dict[str, int], ctx: HandlerContext) -> None:
        return None

    with embedded(jobs) as client:
        registered = wait_for_limits(client, "reports")
        assert (registered.source, registered.limits.concurrency) == ("code", 4)
        changed = client.set_limits("reports", Limits(concurrency=1, rate=Rate(5, per=60, burst=2)))
        assert (changed.source, changed.limits.concurrency, changed.registered.concurrency) == ("api", 1, 4)
        assert changed.limits.rate == Rate(5, per=60.0, burst=2)
        [listed] = [t for t in client.job_types() if t.name == "reports"]
        assert (listed.limits, listed.limits_source) == (changed.limits, "api")
        cleared = client.clear_limits("reports")
        assert (cleared.source, cleared.limits.concurrency, cleared.override) == ("code", 4, None)
        # Bodies the typed client cannot send: a clear 400 each, and the limits stay as they were.
        url = f"{client.base_url}/job-types/reports/limits"
        for body, reason in (
            ({"concurrency": 0}, "concurrency must be a whole number from 1"),
            ({"speed": 3}, "unknown limit fields: speed"),
            ({"rate": {"starts": 5, "perSeconds": -1}}, "rate.perSeconds must be more than 0"),
            ([1, 2], "limits: must be an object"),
            ("null", "limits: must be an object"),
            ({"rate": {"starts": None}}, "rate: starts must be a whole number"),
            ({"rate": {"starts": 5, "burst": None}}, "may be left out, not null"),
            ({"concurrency": True}, "concurrency must be a whole number"),
            ({"concurrency": 2.5}, "concurrency must be a whole number"),
            ({"rate": 7}, "rate must be"),
            ({"ratePerKey": 7}, "ratePerKey must be"),
            ({"ratePerKey": {"starts": 0}}, "ratePerKey.starts must be a whole number"),
            # Each error names the field as the request sent it (not `rate`, not snake_case).
            ({"ratePerKey": {"starts": 1.5}}, "ratePerKey.starts must be a whole number"),
            ({"ratePerKey": {"starts": 1, "perSeconds": 0}}, "ratePerKey.perSeconds must be more than 0"),
            ({"ratePerKey": {"starts": 1, "burst": 0}}, "ratePerKey.burst must be a whole number"),
            ({"concurrencyPerTenant": 0}, "concurrencyPerTenant must be a whole number"),
            ({"concurrencyPerKey": "2"}, "concurrencyPerKey must be a whole number"),
        ):
            raw = body if isinstance(body, str) else json.dumps(body)
            answer = httpx.put(url, content=raw, headers={"Content-Type": "application/json"})
            assert answer.status_code == 400
            assert reason in answer.json()["error"]
        assert client.limits("reports").source == "code"
        with pytest.raises(NotFound):
            client.limits("no-such-type")
        with pytest.raises(NotFound):  # as GET and PUT answer
            client.clear_limits("no-such-type")


def attempt_starts(client: Client, made: list[Enqueued] | list[Job]) -> list[list[datetime]]:
    """Each job's attempts' start times, once it completed."""
    found = []
    for enqueued in made:
        assert enqueued.id is not None
        assert client.wait(enqueued.id, timeout=60).status == "completed"
        found.append([e.started_at for e in client.executions(enqueued.id) if e.started_at is not None])
    return found


def wait_for_limits(client: Client, job_type: str) -> TypeLimits:
    """The type's limits once its executor has announced them."""
    return wait_until(
        lambda: found if (found := client.limits(job_type)).source is not None else None, 10, "the limits announced"
    )


def waiting_for(client: Client, job_id: str) -> str:
    """What the job waits for, once the API says (the claim that held it back may come a moment after it)."""
    return str(wait_until(lambda: client.get(job_id).raw.get("waitingFor"), 10, "the job to say what it waits for"))


def test_a_job_held_back_by_a_limit_says_which_one_it_waits_for() -> None:
    release = threading.Event()
    jobs = JobTypes()

    @jobs.handler("one-at-a-time", limits=Limits(concurrency=1))
    def one_at_a_time(payload: dict[str, int], ctx: HandlerContext) -> None:
        release.wait(30)

    with embedded(jobs) as client:
        first = client.create("one-at-a-time", {"n": 1})
        client.wait(first.id, statuses="running", timeout=30)
        second = client.create("one-at-a-time", {"n": 2})
        assert waiting_for(client, second.id) == "the job type's concurrency limit (1 at once)"
        assert client.get(second.id).status == "pending"
        release.set()
        assert client.wait(second.id, timeout=30).status == "completed"
        assert "waitingFor" not in client.get(second.id).raw


def test_an_operators_change_of_rate_applies_at_once() -> None:
    jobs = JobTypes()

    @jobs.handler("hourly-quota", limits=Limits(rate=Rate(1, per=3600)))
    def hourly_quota(payload: dict[str, int], ctx: HandlerContext) -> None:
        return None

    with embedded(jobs) as client:
        first = client.create("hourly-quota", {"n": 1})
        assert client.wait(first.id, timeout=30).status == "completed"
        second = client.create("hourly-quota", {"n": 2})
        assert waiting_for(client, second.id) == "its turn under the job type's start rate (1 per 3600s)"
        client.set_limits("hourly-quota", Limits(rate=Rate(100, per=1)))  # not an hour later: within seconds
        assert client.wait(second.id, timeout=30).status == "completed"
