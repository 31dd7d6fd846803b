"""The MongoDB claim's lanes go through its read-ahead (read_ahead.py): a lane met for the first time is read
ahead, and a lane its listing no longer names is forgotten. The memory itself is tested in
tests/unit/test_read_ahead.py; this checks that the claim's port uses it."""

from __future__ import annotations

from datetime import timedelta

from shared.model import utc_now
from shared.store.fair_claims import Turns
from shared.store.mongo import MongoJobStore
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
