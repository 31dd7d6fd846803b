"""An executor's announcement of the job types it serves, renewed with its heartbeat: how the API and the
schedulers, which do not import the handler modules, learn which types exist and which have a live executor."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from datetime import datetime, timedelta

from jobsched.type_defaults import TypeDefaults
from shared.cron import ScheduleError
from shared.job_types.announcements import JobTypeRegistry
from shared.model import utc_now
from shared.schedules.declared import DeclaredSchedules
from shared.store.base import StoreError

log = logging.getLogger("jobsched.executor")
KEEPER_JOIN_S = 10.0  # how long a stopping executor waits for a pass over its declared schedules
LIVE_BEATS = 3  # an announcement stays live this many heartbeats: one missed beat is not a dead executor


class TypeAnnouncer:
    def __init__(
        self,
        registry: JobTypeRegistry,
        executor_id: str,
        types: Mapping[str, TypeDefaults],
        heartbeat: timedelta,
        *,
        schedules: DeclaredSchedules | None = None,
    ) -> None:
        """`schedules`: the declared schedules of the (one) type, kept after each announcement."""
        self._registry = registry
        self._executor_id = executor_id
        self._types = dict(types)
        self._live_for = heartbeat * LIVE_BEATS
        self._schedules = schedules
        self._keeper: threading.Thread | None = None

    @property
    def schedules(self) -> DeclaredSchedules | None:
        return self._schedules

    def announce(self) -> bool:
        """Announce (or renew), then keep the declared schedules, before returning (at start: the schedules exist
        before the executor serves); a store failure is logged and retried at the next beat."""
        now = utc_now()
        if not self._announce(now):
            return False
        self._keep_schedules(now)
        return True

    def beat(self) -> bool:
        """announce, for the heartbeat: the declared schedules are kept on a thread of their own, one pass at a
        time, so that a slow pass never delays the beat's lease renewals and cancellation checks."""
        now = utc_now()
        if not self._announce(now):
            return False
        if self._schedules is not None and (self._keeper is None or not self._keeper.is_alive()):
            self._keeper = threading.Thread(
                target=self._keep_schedules, args=(now,), name="declared-schedules", daemon=True
            )
            self._keeper.start()
        return True

    def _announce(self, now: datetime) -> bool:
        try:
            self._registry.announce(self._executor_id, self._types, now, now + self._live_for)
        except StoreError as exc:
            log.warning("job types not announced", extra={"action": "announce_failed", "error": str(exc)})
            return False
        return True

    def _keep_schedules(self, now: datetime) -> None:
        if self._schedules is None:
            return
        try:
            self._schedules.keep(now)
        except (StoreError, ScheduleError) as exc:
            log.warning("declared schedules not kept", extra={"action": "schedules_failed", "error": str(exc)})
        except Exception:  # a defect there must not stop the heartbeat (cancellations, announcements)
            log.exception("declared schedules not kept", extra={"action": "schedules_failed"})

    def withdraw(self) -> None:
        """On shutdown: no longer live, so the scheduler stops sending this executor's types work at once (after a
        pass over the declared schedules still under way, so that it does not write after the executor left)."""
        if self._keeper is not None:
            self._keeper.join(KEEPER_JOIN_S)
        try:
            self._registry.withdraw(self._executor_id, utc_now())
        except StoreError as exc:
            log.warning("job types not withdrawn", extra={"action": "withdraw_failed", "error": str(exc)})
