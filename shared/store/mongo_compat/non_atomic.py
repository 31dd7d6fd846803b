"""Updates are not atomic: heartbeats also extend the lease kept in the attempt's record.

Why: FerretDB 1.x evaluates update and findAndModify by reading the matching documents and writing them back
whole, without re-checking the filter in between, so a slower writer can put back a state a faster one had
already left: a claim's or a re-pend's write-back can make a running job read `queued` again, or undo a finished
attempt. Ownership is unaffected (it is decided by unique inserts), and the production path already repairs a
job from its attempt records when a start finds the attempt taken (MongoJobStore._repair): a decided outcome is
re-applied, and an attempt whose job never read as running is closed as lost once the lease in its record has
run out. On this server the job may have been running after all, its executor alive and heartbeating into the
job document that was written back; so the heartbeats extend the record's lease as well, and the repair leaves
a live attempt alone. An attempt whose executor died meanwhile is closed by the repair once that lease ran out.

What it costs: one more update per running attempt and heartbeat.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from shared.model import Job
from shared.store.mongo import translate_errors
from shared.store.mongo_compat.probe import Probed
from shared.store.transitions import attempt_record_id


class NonAtomicUpdates(Probed):
    def extend_leases(self, jobs: Sequence[Job], lease_until: datetime) -> None:
        super().extend_leases(jobs, lease_until)
        if self._accommodating:
            with translate_errors():
                for job in jobs:
                    record = {"_id": attempt_record_id(job.id, job.next_attempt)}
                    self._executions.update_one(record, {"$set": {"leaseExpiresAt": lease_until}})
