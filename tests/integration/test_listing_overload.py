"""A streamed listing under overload, through `jobsched dev` as a process: 64 writers create jobs while listers
read a tenant of 5,000 jobs at limit=5000. Every listing answer is whole or refused before its body: a 200 whose
body is the JSON array of every job, or a 503 `{"error": ...}` with Retry-After. Never a 200 cut off mid-array
(the server refusing a later page its read slot once the status line was sent).

The store slots are scarce and the wait for them short (API_STORE_SLOTS, API_STORE_WAIT), so that the overload
is certain on any machine rather than a matter of its speed: with the defaults the same cut needs a slower or
busier machine (as reported: 64 writers and listings at once on `jobsched dev`)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import httpx2 as httpx
import pytest

from shared.model import format_time, utc_now
from shared.store.base import NewJob
from shared.store.sqlite import SqliteJobStore
from tests.e2e.devmode import Dev

WRITERS = 64
POSTS_PER_WRITER = 16
LISTERS = 8
LISTINGS_PER_LISTER = 40  # at most: a lister stops once the writers are done, after at least one listing
BIG_TENANT_JOBS = 5000
PAYLOAD = {"filler": "x" * 512}
SCARCE = {"API_STORE_SLOTS": "2", "API_STORE_WAIT": "20ms"}


def fill_big_tenant(path: Path) -> None:
    """The tenant the listers read: far-future jobs, so they never run, and nothing is written to it meanwhile."""
    store = SqliteJobStore(path, durable=False)
    store.ensure_schema()
    later = utc_now() + timedelta(days=365)
    news = [
        NewJob(idempotencyKey=f"big-{n}", tenantId="big", jobType="noop", scheduledAt=later, payload=PAYLOAD)
        for n in range(BIG_TENANT_JOBS)
    ]
    assert all(not isinstance(answer, Exception) for answer in store.create_many(news))
    store.close()


@dataclass
class Seen:
    """What the listers received, by kind of answer; `broken` holds a description of each broken one."""

    kinds: Counter[str] = field(default_factory=Counter)
    broken: list[str] = field(default_factory=list)
    posts: Counter[int] = field(default_factory=Counter)


@pytest.mark.timeout(600)
def test_a_listing_under_overload_is_whole_or_refused_before_its_body(tmp_path: Path) -> None:
    dev = Dev(tmp_path)
    fill_big_tenant(dev.db)
    process = dev.start(**SCARCE)
    try:
        seen = asyncio.run(load(dev.port))
        print(f"\nlistings: {dict(seen.kinds)}; POSTs: {dict(seen.posts)}")
        assert seen.broken == [], seen.broken
        assert seen.kinds["whole"] > 0, "no listing was answered whole"
        assert set(seen.posts) <= {201, 503}, seen.posts
        assert "response already started" not in process.log_text()
    finally:
        process.stop()
        dev.http.close()


async def load(port: int) -> Seen:
    seen = Seen()
    writers_done = asyncio.Event()
    connections = WRITERS + LISTERS
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120, limits=limits) as client:

        async def writer(w: int) -> None:
            for n in range(POSTS_PER_WRITER):
                body = {
                    "idempotencyKey": f"load-{w}-{n}",
                    "tenantId": "load",
                    "jobType": "noop",
                    "scheduledAt": format_time(utc_now()),
                }
                seen.posts[(await client.post("/jobs", json=body)).status_code] += 1

        async def lister() -> None:
            for n in range(LISTINGS_PER_LISTER):
                if n and writers_done.is_set():
                    return
                kind, broken = await one_listing(client)
                seen.kinds[kind] += 1
                if broken:
                    seen.broken.append(broken)

        listers = [asyncio.create_task(lister()) for _ in range(LISTERS)]
        await asyncio.gather(*(writer(w) for w in range(WRITERS)))
        writers_done.set()
        await asyncio.gather(*listers)
    return seen


async def one_listing(client: httpx.AsyncClient) -> tuple[str, str | None]:
    """One GET of the big tenant, read to its end: ("whole" | "refused" | "broken", what was wrong or None)."""
    received = bytearray()
    async with client.stream("GET", "/jobs", params={"tenantId": "big", "limit": str(BIG_TENANT_JOBS)}) as response:
        try:
            async for chunk in response.aiter_bytes():
                received += chunk
        except httpx.TransportError as exc:  # the connection closed before the body's end
            return "broken", f"{response.status_code} cut after {len(received)} bytes: {exc!r}"
    try:
        answer = json.loads(received)
    except ValueError:
        return "broken", f"{response.status_code} with a body that is not JSON: {bytes(received[-80:])!r}"
    if response.status_code == 503:
        if isinstance(answer, dict) and set(answer) == {"error"} and "retry-after" in response.headers:
            return "refused", None
        return "broken", f"503 without its error or Retry-After: {answer!r} {dict(response.headers)}"
    if response.status_code == 200 and isinstance(answer, list) and len(answer) == BIG_TENANT_JOBS:
        return "whole", None
    return "broken", f"{response.status_code}: {str(answer)[:200]}"
