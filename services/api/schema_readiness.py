"""Brings the store's schema to this version at start-up (its pending migrations), retrying while the database is
down.

Writes wait for it: a job inserted before the unique idempotencyKey index exists could be duplicated.
The API process still starts (liveness stays green, /readyz says why it is not ready). A database that a later
jobsched migrated (SchemaTooNew) is not retried: /readyz says what to do, and writes answer 503 at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from starlette.concurrency import run_in_threadpool

from shared.store.base import ApiStore, SchemaTooNew, StoreUnavailable

log = logging.getLogger("jobsched.api")
RETRY_INITIAL_S = 0.5
RETRY_MAX_S = 10.0
WAIT_FOR_WRITE_S = 5.0


class SchemaReadiness:
    def __init__(self, store: ApiStore) -> None:
        self._store = store
        self._ready = asyncio.Event()
        self._settled = asyncio.Event()  # ready, or refused
        self._task: asyncio.Task[None] | None = None
        self.problem: str | None = None
        self.refused = False  # the database's schema is too new: no retry will make it ready

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._ensure())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()

    async def wait_ready(self) -> None:
        if self._ready.is_set():
            return
        if self._task is None and not self.refused:  # no lifespan (e.g. a bare test client): do it inline
            try:
                await run_in_threadpool(self._store.ensure_schema)
            except SchemaTooNew as exc:
                self._refuse(exc)
                raise
            self._became_ready()
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._settled.wait(), WAIT_FOR_WRITE_S)
        if not self._ready.is_set():
            raise StoreUnavailable(self.problem or "store schema not ready")

    async def _ensure(self) -> None:
        delay = RETRY_INITIAL_S
        while True:
            try:
                await run_in_threadpool(self._store.ensure_schema)
            except SchemaTooNew as exc:
                self._refuse(exc)
                return
            except StoreUnavailable as exc:
                self.problem = str(exc)
                log.warning("schema not ready, retrying", extra={"action": "schema_retry", "error": str(exc)})
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
                continue
            self.problem = None
            self._became_ready()
            log.info("schema ready", extra={"action": "schema_ready"})
            return

    def _became_ready(self) -> None:
        self._ready.set()
        self._settled.set()

    def _refuse(self, exc: SchemaTooNew) -> None:
        self.problem, self.refused = str(exc), True
        self._settled.set()
        log.error("schema refused", extra={"action": "schema_refused", "error": str(exc)})
