"""The MongoDB claim's lanes go through its read-ahead (read_ahead.py): a lane met for the first time is read
ahead (with others, in one read, where the server's lane reads walk the backlog), and a lane its listing no longer
names is forgotten. The memory itself is tested in
tests/unit/test_read_ahead.py; this checks that the claim's port uses it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pymongo import MongoClient, monitoring

from shared.model import Job, utc_now
from shared.store.fair_claims import Turns
from shared.store.mongo import MongoDatabase, MongoJobStore
from shared.store.mongo.claims import MongoClaimPort
from tests.contract.store_kit import new


def test_a_new_lane_is_read_ahead_and_forgotten_once_its_listing_no_longer_names_it(mongo_store: MongoJobStore) -> None:
    now = utc_now()
    runs = [mongo_store.create(new(tenantId="a", scheduledAt=now - timedelta(minutes=1))) for _ in range(3)]
    port = MongoClaimPort(mongo_store.database, Turns())
    [lane] = port.lanes("noop", now, lambda tenant: set())
    assert [run.id for run in lane.buffered] == [runs[0].id]
    for run in runs:
        mongo_store.cancel(run.id)
    assert port.has_due_run("noop", now)  # answered by the runs read ahead with the lane's first run
    assert port.lanes("noop", now, lambda tenant: set()) == []
    assert not port.has_due_run("noop", now)  # the listing named no lane: what was kept of it is gone


class Reads(monitoring.CommandListener):
    def __init__(self) -> None:
        self.names: list[str] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        self.names.append(event.command_name)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


@pytest.mark.parametrize("together", [True, False], ids=["together", "one-by-one"])
def test_lanes_met_at_once_take_their_runs_in_claim_order_however_they_are_read(
    mongo_store: MongoJobStore, mongo_uri: str, together: bool
) -> None:
    """Read together (a server whose every lane read walks the backlog) or one by one (MongoDB), the lanes a claim
    meets give their runs in claim order: priority first, then due time."""
    now = utc_now()
    created: dict[str, list[Job]] = {}
    for n in range(12):
        run = new(tenantId=f"t{n % 3}", priority=n % 2, scheduledAt=now - timedelta(minutes=n))
        created.setdefault(run.tenantId, []).append(mongo_store.create(run))
    reads = Reads()
    client: MongoClient[dict[str, Any]] = MongoClient(mongo_uri, tz_aware=True, event_listeners=[reads])
    database = MongoDatabase(client, mongo_store.database.name)
    database.index_terms_by_path = together  # the test server answers both ways of reading
    try:
        lanes = MongoClaimPort(database, Turns()).lanes("noop", now, lambda tenant: set())
        assert reads.names == (["distinct", "aggregate"] if together else ["distinct", "find", "find", "find"])
        assert sorted(lane.tenant_id for lane in lanes) == ["t0", "t1", "t2"]
        for lane in lanes:
            taken: list[Job] = []
            while (turn := lane.next_run(1)) is not None:  # the lane's turns, one run each
                taken.append(turn)
            in_claim_order = sorted(created[lane.tenant_id], key=lambda job: (-job.priority, job.scheduledAt))
            assert [run.id for run in taken] == [job.id for job in in_claim_order]
    finally:
        client.close()
