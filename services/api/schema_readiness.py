"""Creates the store's indexes at start-up, retrying while the database is down.

Writes wait for it: a job inserted before the unique idempotencyKey index exists could be duplicated.
The API process still starts (liveness stays green, /readyz says why it is not ready).
"""

from __future__ import annotations

import asyncio
import logging

from starlette.concurrency import run_in_threadpool

from shared.store.base import ApiStore, StoreUnavailable

log = logging.getLogger("jobsched.api")
RETRY_INITIAL_S = 0.5
RETRY_MAX_S = 10.0
WAIT_FOR_WRITE_S = 5.0


class SchemaReadiness:
    def __init__(self, store: ApiStore) -> None:
        self._store = store
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.problem: str | None = None

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
        if self._task is None:  # no lifespan (e.g. a bare test client): do it inline
            await run_in_threadpool(self._store.ensure_schema)
            self._ready.set()
            return
        try:
            await asyncio.wait_for(self._ready.wait(), WAIT_FOR_WRITE_S)
        except TimeoutError:
            raise StoreUnavailable(self.problem or "store schema not ready") from None

    async def _ensure(self) -> None:
        delay = RETRY_INITIAL_S
        while True:
            try:
                await run_in_threadpool(self._store.ensure_schema)
            except StoreUnavailable as exc:
                self.problem = str(exc)
                log.warning("schema not ready, retrying", extra={"action": "schema_retry", "error": str(exc)})
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
                continue
            self.problem = None
            self._ready.set()
            log.info("schema ready", extra={"action": "schema_ready"})
            return
