"""What a batch's callback reads through its HandlerContext (ctx.batch(), ctx.batch_results()): the store's
batch and members, in the public package's types."""

from __future__ import annotations

from jobsched.handlers import BatchMember, BatchProgress
from shared.batches import MemberResult
from shared.store.base import BatchNotFound, ExecutorStore


class BatchReads:
    def __init__(self, store: ExecutorStore) -> None:
        self._store = store

    def progress(self, batch_id: str) -> BatchProgress:
        view = self._store.batch(batch_id)
        if view is None:
            raise BatchNotFound(batch_id)
        return BatchProgress(batch_id, view.status.value, view.total, dict(view.counts))

    def members(self, batch_id: str, after: BatchMember | None, limit: int) -> list[BatchMember]:
        last = None if after is None else MemberResult(after.job_id, after.status, after.result)
        return [BatchMember(m.jobId, m.status, m.result) for m in self._store.batch_members(batch_id, last, limit)]
