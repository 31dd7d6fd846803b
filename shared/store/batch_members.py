"""Which jobs may be added to a batch, decided once for every store: one-off jobs of the batch's tenant (a
template never ends, so a batch holding one would never fire)."""

from __future__ import annotations

from collections.abc import Sequence

from shared.batches import Batch
from shared.store.base import JobRefused, NewJob, StoreError


def member_refusals(batch: Batch, news: Sequence[NewJob]) -> dict[int, StoreError]:
    """The jobs of `news` (by index) that cannot be members of `batch`, each with why."""
    refused: dict[int, StoreError] = {}
    for index, new in enumerate(news):
        if new.tenantId != batch.tenantId:
            refused[index] = JobRefused(f"the batch is tenant {batch.tenantId}'s")
        elif new.cron is not None or new.interval is not None:
            refused[index] = JobRefused("a batch's member is a one-off job (scheduledAt), not a recurring template")
    return refused
