"""The soak's load: one-off jobs POSTed to /jobs at a steady rate, open loop (each request goes out at its planned
time whether or not the earlier ones were answered, so an API that falls behind shows as latency and as a
lower achieved rate, not as a lighter load), in a fixed mix of kinds, and a template firing every second.

Create latency is measured from the planned send time. At most MAX_IN_FLIGHT requests wait for an answer; beyond
that the generator waits too, so what it sent and what was created say the rate actually achieved.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx2 as httpx

from loadtest.soak.handlers import FAIL_ATTEMPTS, SOAK_TYPE
from loadtest.soak.tracking import Tracked, Tracker
from loadtest.soak.windows import Windows
from shared.model import Status, format_time, parse_time, utc_now

MAX_IN_FLIGHT = 512
REQUEST_TIMEOUT_S = 10.0
TENANTS = 4
TEMPLATE_INTERVAL = "1s"
MIX_SEED = 48
ERROR_SAMPLE_CHARS = 300


@dataclass(frozen=True)
class Kind:
    name: str
    share: int  # jobs of this kind in every 100
    expected: str  # the final status it must reach
    ahead_s: tuple[float, float] = (0.0, 0.0)  # scheduled this long after its send (uniform between the two)
    fail_attempts: int = 0
    max_attempts: int = 3
    cancel_after_s: float | None = None  # DELETE /jobs/{id} this long after it was created


KINDS = (
    Kind("due now", 70, Status.COMPLETED.value),
    Kind("due within 10 s", 15, Status.COMPLETED.value, ahead_s=(1.0, 10.0)),
    Kind("retried", 10, Status.COMPLETED.value, fail_attempts=2, max_attempts=5),
    Kind("dead-lettered", 2, Status.DLQ.value, fail_attempts=1_000, max_attempts=2),
    # due in 30 s and cancelled after 1 s: still pending when the DELETE comes
    Kind("cancelled", 3, Status.CANCELLED.value, ahead_s=(30.0, 30.0), cancel_after_s=1.0),
)


def mix() -> list[Kind]:
    """One hundred kinds in a fixed shuffled order: job n is of kind mix[n % 100]."""
    kinds = [kind for kind in KINDS for _ in range(kind.share)]
    random.Random(MIX_SEED).shuffle(kinds)
    return kinds


class Load:
    def __init__(self, client: httpx.AsyncClient, tracker: Tracker, windows: Windows, run_id: str) -> None:
        self._client = client
        self._tracker = tracker
        self._windows = windows
        self._run_id = run_id
        self._mix = mix()
        self._draws = random.Random(MIX_SEED)
        self._tasks: set[asyncio.Task[None]] = set()
        self.error_samples: dict[str, str] = {}  # the first answer of each kind of API error, to say what it was

    async def send(self, rate: float, duration_s: float, stop: asyncio.Event) -> None:
        """Send for `duration_s` (or until `stop`), then wait for the answers and the cancellations."""
        room = asyncio.Semaphore(MAX_IN_FLIGHT)
        began, began_at = time.monotonic(), utc_now()
        n = 0
        while not stop.is_set() and (planned := began + n / rate) < began + duration_s:
            await asyncio.sleep(max(0.0, planned - time.monotonic()))
            await room.acquire()
            planned_at = began_at + timedelta(seconds=planned - began)
            self._start(self._create(n, self._mix[n % len(self._mix)], planned, planned_at), room.release)
            n += 1
        while self._tasks:
            await asyncio.gather(*self._tasks)

    def _start(self, work: Coroutine[Any, Any, None], then: Callable[[], object] | None = None) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if then is not None:
            task.add_done_callback(lambda _: then())

    async def _create(self, n: int, kind: Kind, planned: float, planned_at: datetime) -> None:
        window = self._windows.at(planned_at)
        window.sent += 1
        low, high = kind.ahead_s
        scheduled = utc_now() + timedelta(seconds=self._draws.uniform(low, high))
        body = {
            "idempotencyKey": f"soak-{self._run_id}-{n}",
            "tenantId": f"soak-{n % TENANTS}",
            "jobType": SOAK_TYPE,
            "payload": {FAIL_ATTEMPTS: kind.fail_attempts},
            "maxAttempts": kind.max_attempts,
            "scheduledAt": format_time(scheduled),
        }
        response = await self._request("POST", "/jobs", window.api_errors, body)
        if response is None or response.status_code != 201:
            return
        window.create_ms.append((time.monotonic() - planned) * 1000)
        window.created += 1
        job = response.json()
        created = Tracked(parse_time(job["scheduledAt"]), kind.expected, parse_time(job["createdAt"]))
        self._tracker.add(job["id"], created)
        if kind.cancel_after_s is not None:
            self._start(self._cancel(job["id"], kind.cancel_after_s))

    async def _cancel(self, job_id: str, after_s: float) -> None:
        await asyncio.sleep(after_s)
        response = await self._request("DELETE", f"/jobs/{job_id}", self._windows.at(utc_now()).api_errors)
        self._tracker.cancel_answered(job_id, response.status_code if response is not None else 0)

    async def _request(
        self, method: str, path: str, errors: Counter[str], body: dict[str, Any] | None = None
    ) -> httpx.Response | None:
        """The answer, or None when there was none; anything but 2xx is counted in `errors`."""
        try:
            response = await self._client.request(method, path, json=body)
        except httpx.HTTPError as exc:
            errors[f"{method} {type(exc).__name__}"] += 1
            return None
        if not 200 <= response.status_code < 300:
            kind = f"{method} {response.status_code}"
            errors[kind] += 1
            self.error_samples.setdefault(kind, response.text[:ERROR_SAMPLE_CHARS])
        return response


async def create_template(client: httpx.AsyncClient, run_id: str) -> str:
    body = {
        "idempotencyKey": f"soak-{run_id}-template",
        "tenantId": "soak-0",
        "jobType": SOAK_TYPE,
        "payload": {FAIL_ATTEMPTS: 0},
        "interval": TEMPLATE_INTERVAL,
    }
    response = await client.post("/jobs", json=body)
    if response.status_code != 201:
        raise RuntimeError(f"the template was refused: {response.status_code} {response.text[:300]}")
    return str(response.json()["id"])


async def cancel_template(client: httpx.AsyncClient, template_id: str) -> str:
    """Cancel the template (it spawns nothing more): the status it answered with, or the error."""
    try:
        response = await client.delete(f"/jobs/{template_id}")
    except httpx.HTTPError as exc:
        return type(exc).__name__
    return str(response.json().get("status")) if response.status_code == 200 else str(response.status_code)
