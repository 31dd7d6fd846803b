"""Batches on MongoDB, where a batch is fired after its last member's end, not in the same write
(store/mongo/batches.py): a crash in between leaves the batch `firing`, and the reaper fires it, going through the
firing batches a page a sweep from where the last sweep stopped, so batches still running never hide it."""

from __future__ import annotations

from typing import Any

from bson import ObjectId
from pymongo.database import Database

from shared.model import Status
from shared.store.base import NewBatch
from shared.store.mongo import MongoJobStore
from tests.contract.store_kit import new, reload


def sealed_batch(store: MongoJobStore, key: str, members: int) -> tuple[str, list[str]]:
    batch = store.create_batch(NewBatch("tenant-a", key, onComplete=new(jobType="on-complete"))).batch
    made = store.add_to_batch(batch.id, [new(jobType=f"member-{key}") for _ in range(members)])
    store.seal_batch(batch.id)
    return batch.id, [m.id for m in made if not isinstance(m, Exception)]


def test_the_reaper_fires_a_batch_whose_last_members_end_was_not_checked(
    mongo_store: MongoJobStore, mongo_db: Database[dict[str, Any]]
) -> None:
    store = mongo_store
    running = [sealed_batch(store, f"running-{n}", 1)[0] for n in range(2)]  # members never end: firing stays
    crashed, ids = sealed_batch(store, "crashed", 2)
    # Its members ended by processes that died before checking the batch (their ends written, nothing else).
    mongo_db["jobs"].update_many({"_id": {"$in": [ObjectId(i) for i in ids]}}, {"$set": {"status": "completed"}})
    view = store.batch(crashed)
    assert view is not None
    assert view.batch.onComplete is not None
    assert reload(store, view.batch.onComplete).status is Status.WAITING
    assert store.settle_batches(2) == 2  # the first page: the two still running
    assert reload(store, view.batch.onComplete).status is Status.WAITING
    assert store.settle_batches(2) == 1  # the next sweep goes on from there
    assert reload(store, view.batch.onComplete).status is Status.PENDING
    fired = store.batch(crashed)
    assert fired is not None
    assert fired.batch.firedAt is not None
    assert store.settle_batches(10) == 2  # from the first again: only those still running
    assert all(store.batch(b).batch.firedAt is None for b in running)  # type: ignore[union-attr]
