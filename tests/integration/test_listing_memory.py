"""A long listing of large jobs through `jobsched dev` as a process (a tenant's jobs, a template's runs): the
response is the bare JSON array of every job, streamed, and the server's memory grows by about a page, not by
the size of the response."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from shared.model import MAX_PAYLOAD_BYTES, utc_now
from shared.schedules.engine import ScheduleEngine
from shared.store.base import NewJob
from shared.store.sqlite import SqliteJobStore
from tests.e2e.devmode import Dev

JOBS = 200
MIB = 1024 * 1024


def peak_rss_growth_kib(pid: int) -> tuple[int, int]:
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(status["VmHWM"].split()[0]), int(status["VmRSS"].split()[0])


@pytest.mark.parametrize("listing", ["jobs", "runs"])
def test_a_listing_of_large_jobs_streams_within_bounded_memory(tmp_path: Path, listing: str) -> None:
    """GET /jobs of a tenant, or GET /jobs/{id}/runs of a template, of 200 jobs near the payload limit."""
    dev = Dev(tmp_path)
    store = SqliteJobStore(dev.db, durable=False)
    store.ensure_schema()
    later = utc_now() + timedelta(days=365)
    filler = "x" * (MAX_PAYLOAD_BYTES - 1024)
    large: dict[str, Any] = {"tenantId": "big", "jobType": "noop", "scheduledAt": later, "payload": {"f": filler}}
    if listing == "jobs":
        for n in range(JOBS):
            store.create(NewJob(idempotencyKey=f"big-{n}", **large))
        path, params = "/jobs", {"tenantId": "big", "limit": "5000"}
    else:
        # Paused: nothing of it fires while the server runs; an interval's fire times count from createdAt.
        since = later - timedelta(hours=JOBS)
        template = store.create(NewJob(idempotencyKey="tpl", interval="1h", createdAt=since, paused=True, **large))
        spawned = ScheduleEngine(store).backfill(template, since, later).spawned
        assert spawned == JOBS
        path, params = f"/jobs/{template.id}/runs", {"limit": "5000"}
    store.close()
    process = dev.start()
    try:
        pid = process.process.pid
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # reset the peak resident size to the current one
        _, before_kib = peak_rss_growth_kib(pid)
        received = bytearray()
        with dev.http.stream("GET", path, params=params) as response:
            assert response.status_code == 200
            assert response.headers["content-type"] == "application/json"
            for chunk in response.iter_bytes():
                received += chunk
        peak_kib, _ = peak_rss_growth_kib(pid)
        jobs = json.loads(received)
        assert isinstance(jobs, list)
        assert len(jobs) == JOBS
        assert all(len(job["payload"]["f"]) == len(filler) for job in jobs)
        growth_mib = (peak_kib - before_kib) / 1024
        print(f"\n{listing} listing of {len(received) / MIB:.0f} MiB: server peak memory +{growth_mib:.0f} MiB")
        # About one page (PAGE_SIZE jobs) read, rendered and being sent at a time, never the whole listing.
        assert growth_mib < 40, f"+{growth_mib:.0f} MiB for a {len(received) / MIB:.0f} MiB body"
    finally:
        process.stop()
        dev.http.close()
