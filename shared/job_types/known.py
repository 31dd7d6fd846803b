"""The job types the API accepts: the ones this process has handlers for (the built-ins, in a process that
loads no plug-ins), the ones JOB_TYPES lists (so jobs can be created before the first executor of a new type
starts), and the ones executors announced within JOB_TYPE_RETENTION. The announced ones are read from the store
every REFRESH_S by a background task, never per request; GET /job-types reads them fresh."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from starlette.concurrency import run_in_threadpool

from jobsched.handlers import JobTypes
from jobsched.type_defaults import TypeDefaults
from shared.job_types.announcements import JobTypeInfo, JobTypeRegistry
from shared.job_types.limits import LimitsView
from shared.model import utc_now
from shared.store.base import StoreError

log = logging.getLogger("jobsched.api")
REFRESH_S = 2.0


class KnownTypes:
    def __init__(
        self,
        registry: JobTypeRegistry,
        *,
        local: JobTypes,
        configured: Collection[str] = (),
        retention: timedelta = timedelta(days=7),
    ) -> None:
        self._registry = registry
        self._local = local
        self._configured = frozenset(configured)
        self._retention = retention
        self._announced: dict[str, JobTypeInfo] = {}
        self._reads_started = self._read_applied = 0
        self.limits = LimitsView(registry, retention=retention)  # read on a store thread: it may refresh
        self._loaded = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._refresh_forever())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def accepts(self, name: str) -> bool:
        """Known without the store for local and configured types; otherwise by the last refresh (the first
        request before any refresh waits for one, and a store error then is a 503)."""
        if name in self._local or name in self._configured:
            return True
        if not self._loaded.is_set():
            await self._refresh()
        return name in self._announced

    def names(self) -> list[str]:
        return sorted({*self._local.names(), *self._configured, *self._announced})

    def defaults(self, name: str) -> TypeDefaults | None:
        """The type's registered defaults: as its executors last announced them, else this process's own (None: a
        type not known yet). A job created keeps what they say of its attempt budget (unless it gives its own) and
        of its backoff (JobRequest.to_new_job)."""
        announced = self._announced.get(name)
        if announced is not None:
            return announced.defaults
        local = self._local.get(name)
        return local.defaults if local is not None else None

    async def listing(self) -> list[dict[str, Any]]:
        """GET /job-types: every accepted type with its live executors and last announcement, fresh."""
        now = utc_now()
        infos = await self._read(now)
        body = [info.to_wire() for info in infos]
        announced = {info.name for info in infos}
        body += [_never_announced(name) for name in sorted({*self._local.names(), *self._configured} - announced)]
        return sorted(body, key=lambda entry: str(entry["name"]))

    async def _read(self, now: datetime) -> list[JobTypeInfo]:
        # Reads overlap (the background refresh, the first request's, GET /job-types): one that started earlier
        # but ends later must not put back what a newer one already replaced (a type just announced, accepted,
        # then refused until the next refresh).
        self._reads_started += 1
        read = self._reads_started
        infos = await run_in_threadpool(self._registry.job_types, now, now - self._retention)
        if read > self._read_applied:
            self._read_applied = read
            self._announced = {info.name: info for info in infos}
        self._loaded.set()
        return infos

    async def _refresh(self) -> None:
        await self._read(utc_now())

    async def _refresh_forever(self) -> None:
        while True:
            try:
                await self._refresh()
            except StoreError as exc:  # keep the last answer; /readyz reports the store
                log.warning("job types not refreshed", extra={"action": "job_types_unavailable", "error": str(exc)})
            await asyncio.sleep(REFRESH_S)


def _never_announced(name: str) -> dict[str, Any]:
    return {"name": name, "executors": 0, "lastSeenAt": None}
