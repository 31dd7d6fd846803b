"""The reference design's claim, kept only as the benchmarks' baseline: one findOneAndUpdate per job (on
SQLite, a claim of one job), at most CLAIM_BATCH of them per SCHEDULER_TICK. The product claims in batches.

`python -m loadtest.reference scheduler|dev [ARGS...]` runs that product process with its dispatcher claiming
this way (what REFERENCE_ENV selects in the pipeline benchmarks).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Collection
from datetime import datetime
from importlib import import_module
from typing import Any

from pymongo import MongoClient, ReturnDocument

from services.scheduler.dispatcher import Dispatcher
from shared.bus.base import Bus
from shared.config import Settings
from shared.job_types.served import ServedTypes
from shared.model import Job
from shared.store import transitions
from shared.store.base import SchedulerStore
from shared.store.fair_claims import Claim
from shared.store.mongo import MongoJobStore
from shared.store.mongo.claims import CLAIM_ORDER, due_runs_filter
from shared.store.mongo.codecs import job_from_document

ClaimNext = Callable[[datetime, Collection[str]], "Job | None"]


class MongoClaimNext:
    """The reference's claim on MongoDB: findOneAndUpdate of the first due run in claim order, on a
    connection of its own."""

    def __init__(self, uri: str, database: str) -> None:
        self._client: MongoClient[dict[str, Any]] = MongoClient(uri, tz_aware=True)
        self._jobs = self._client[database]["jobs"]

    def __call__(self, now: datetime, job_types: Collection[str]) -> Job | None:
        doc = self._jobs.find_one_and_update(
            due_runs_filter(now, job_types),
            {"$set": {**transitions.queued(now), "claimToken": uuid.uuid4().hex}},
            sort=CLAIM_ORDER,
            return_document=ReturnDocument.AFTER,
        )
        return job_from_document(doc) if doc else None

    def close(self) -> None:
        self._client.close()


def store_claim_next(store: SchedulerStore) -> ClaimNext:
    """The reference's claim through any store: a batch claim of one job."""

    def claim_next(now: datetime, job_types: Collection[str]) -> Job | None:
        claimed = store.claim_due_jobs(now, 1, job_types)
        return claimed[0] if claimed else None

    return claim_next


class ReferenceDispatcher(Dispatcher):
    """The dispatcher with the reference's claims: up to `batch` single claims, one round per tick."""

    drains_backlog = False

    def __init__(
        self, store: SchedulerStore, bus: Bus, job_types: Collection[str] | ServedTypes, *, batch: int, claim: ClaimNext
    ) -> None:
        super().__init__(store, bus, job_types, batch=batch)
        self._claim_next = claim

    @classmethod
    def from_settings(
        cls, store: SchedulerStore, bus: Bus, job_types: Collection[str] | ServedTypes, settings: Settings
    ) -> ReferenceDispatcher:
        claim = (
            MongoClaimNext(settings.mongo_uri, settings.mongo_db)
            if isinstance(store, MongoJobStore)
            else store_claim_next(store)
        )
        return cls(store, bus, job_types, batch=settings.claim_batch, claim=claim)

    def _claim(self, now: datetime, job_types: frozenset[str]) -> Claim:
        jobs: list[Job] = []
        for _ in range(self._batch):
            job = self._claim_next(now, job_types)
            if job is None:
                break
            jobs.append(job)
        return Claim(jobs)


def main() -> None:
    service, *args = sys.argv[1:]
    if service not in ("scheduler", "dev"):
        raise SystemExit(f"usage: python -m loadtest.reference scheduler|dev [ARGS...], not {service!r}")
    sys.argv = [f"services.{service}", *args]
    import_module(f"services.{service}.__main__").main(ReferenceDispatcher.from_settings)


if __name__ == "__main__":
    main()
