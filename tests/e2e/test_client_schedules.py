"""jobsched.client's schedule calls against a running `jobsched dev`, as a deploy script uses them: upsert by
key (twice: one template, changed in place only when the declaration changed), update, pause, resume, trigger,
backfill, runs, upcoming, preview, and delete (the key of a deleted template can be used again)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from jobsched.client import AsyncClient, Backfilled, BadRequest, Client, Conflict, DuplicateJob
from tests.e2e.devmode import Dev

BERLIN = ZoneInfo("Europe/Berlin")


def midnight_utc() -> datetime:
    return datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def test_a_deploy_script_declares_a_schedule_and_operates_it(dev: Dev) -> None:
    dev.start()
    with Client(dev.base_url, tenant_id="deploy-t") as client:
        first = client.upsert("noop", "nightly-report", {"report": "sales"}, cron="0 3 * * *", timezone="Europe/Berlin")
        again = client.upsert("noop", "nightly-report", {"report": "sales"}, cron="0 3 * * *", timezone="Europe/Berlin")
        assert again == first  # the same declaration: nothing changed, not even the next fire time
        changed = client.upsert("noop", "nightly-report", {"report": "all"}, cron="30 4 * * *", priority=5)
        assert changed.id == first.id
        assert (changed.cron, changed.timezone, changed.payload, changed.priority) == (
            "30 4 * * *",
            "Europe/Berlin",  # left out: kept
            {"report": "all"},
            5,
        )
        assert changed.scheduled_at is not None
        assert changed.scheduled_at.astimezone(BERLIN).time().isoformat() == "04:30:00"
        assert [j.id for j in client.list() if j.idempotency_key == "nightly-report"] == [first.id]
        with pytest.raises(Conflict) as other_type:
            client.upsert("log-message", "nightly-report", cron="30 4 * * *")
        assert "of type 'noop', not 'log-message'" in other_type.value.message

        [fire] = client.upcoming(first.id, 1)
        assert fire == changed.scheduled_at
        previewed = client.preview(cron="30 4 * * *", timezone="Europe/Berlin", count=3)
        assert previewed[0] == fire
        assert [t.astimezone(BERLIN).time().isoformat() for t in previewed] == ["04:30:00"] * 3
        with pytest.raises(BadRequest, match="count must be from 1 to"):
            client.preview(cron="30 4 * * *", count=0)  # sent as given: the API names the range

        paused = client.pause(first.id, "warehouse migration")
        assert (paused.raw["paused"], paused.raw["pauseNote"]) == (True, "warehouse migration")
        assert client.upcoming(first.id) == []
        assert client.resume(first.id).raw["paused"] is False

        run = client.trigger(first.id, {"report": "now"}, idempotency_key="deploy-42")
        assert (run.template_id, run.payload) == (first.id, {"report": "now"})
        assert client.trigger(first.id, idempotency_key="deploy-42").id == run.id
        start = midnight_utc() - timedelta(days=3)
        assert client.backfill(first.id, start, midnight_utc()) == Backfilled(spawned=3, existing=0, skipped=0)
        assert client.backfill(first.id, start, midnight_utc()) == Backfilled(spawned=0, existing=3, skipped=0)
        runs = client.runs(first.id)
        assert len(runs) == 4
        assert {client.wait(r.id).status for r in runs} == {"completed"}

        updated = client.update(first.id, max_attempts=7, policy={"overlap": "skip", "remainingRuns": 10})
        assert (updated.max_attempts, updated.raw["overlap"], updated.raw["remainingRuns"]) == (7, "skip", 10)
        assert "remainingRuns" not in client.update(first.id, policy={"remainingRuns": None}).raw

        assert client.cancel(first.id).status == "cancelled"
        with pytest.raises(Conflict) as finished:
            client.upsert("noop", "nightly-report", cron="30 4 * * *")
        assert "which is cancelled: delete it to use the key again" in finished.value.message
        deleted = client.delete(first.id)
        assert (deleted.id, deleted.status, deleted.runs_deleted) == (first.id, "cancelled", 4)
        reborn = client.upsert("noop", "nightly-report", cron="0 3 * * *", timezone="Europe/Berlin")
        assert reborn.id != first.id
        assert reborn.status == "pending"


def test_upsert_of_a_one_off_job_moves_it_while_it_is_pending(dev: Dev) -> None:
    dev.start()
    with Client(dev.base_url, tenant_id="deploy-t") as client:
        due = datetime.now(UTC) + timedelta(hours=2)
        job = client.upsert("noop", "reminder-7", {"to": "a"}, scheduled_at=due)
        assert client.upsert("noop", "reminder-7", {"to": "a"}) == job  # no time given: the job keeps its own
        later = due + timedelta(hours=1)
        moved = client.upsert("noop", "reminder-7", {"to": "a"}, scheduled_at=later)
        assert (moved.id, moved.scheduled_at) == (job.id, later.replace(microsecond=later.microsecond // 1000 * 1000))
        with pytest.raises(Conflict) as fixed:
            client.upsert("noop", "reminder-7", {"to": "a"}, max_attempts=9)
        assert "maxAttempts of a one-off job cannot be changed" in fixed.value.message
        with pytest.raises(Conflict) as kind:
            client.upsert("noop", "reminder-7", interval="1h")
        assert "which is not a recurring template" in kind.value.message
        assert client.update(job.id, priority=4, scheduled_at=due).priority == 4


def test_the_async_client_upserts_and_deletes(dev: Dev) -> None:
    dev.start()

    async def scenario() -> None:
        async with AsyncClient(dev.base_url, tenant_id="async-deploy") as client:
            first = await client.upsert("noop", "hourly-sync", interval="1h")
            assert await client.upsert("noop", "hourly-sync", interval="1h") == first
            assert (await client.upsert("noop", "hourly-sync", interval="2h")).interval == "2h"
            with pytest.raises(DuplicateJob):  # a plain create still refuses the taken key
                await client.create("noop", idempotency_key="hourly-sync", interval="2h")
            assert len(await client.upcoming(first.id, 3)) == 3
            run = await client.trigger(first.id)
            assert (await client.wait(run.id)).status == "completed"
            await client.cancel(first.id)
            assert (await client.delete(first.id)).runs_deleted == 1
            assert (await client.upsert("noop", "hourly-sync", interval="1h")).id != first.id

    asyncio.run(scenario())
