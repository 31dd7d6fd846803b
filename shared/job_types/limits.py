"""Each job type's limits as every process applies them: an operator's (PUT /job-types/{name}/limits) where set,
else the ones its executors register with the handler (the latest announcement). Read from the store at most
every REFRESH_S, so a change reaches the scheduler and the executors within that; on a store error the last
answer stands."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from jobsched.limits import NO_LIMITS, Limits
from shared.job_types.announcements import JobTypeRegistry
from shared.job_types.served import REFRESH_S
from shared.model import Job, utc_now
from shared.store.base import StoreError
from shared.store.claim_limits import InFlight

log = logging.getLogger("jobsched.limits")


@dataclass(frozen=True)
class TypeLimits:
    """One type's limits: the ones in force, the ones its handler registers, and an operator's (None: none)."""

    registered: Limits = NO_LIMITS
    override: Limits | None = None

    @property
    def effective(self) -> Limits:
        return self.override if self.override is not None else self.registered

    @property
    def source(self) -> str | None:
        """Where the limits in force come from: "api", "code", or None when the type has none."""
        if self.override is not None:
            return "api"
        return "code" if not self.registered.empty else None

    @property
    def in_force_document(self) -> dict[str, Any] | None:
        """The limits in force as the API shows them (None: none)."""
        return None if self.effective.empty else self.effective.to_document()

    def to_wire(self) -> dict[str, object]:
        """null where there are none, as GET /job-types shows them."""
        return {
            "limits": self.in_force_document,
            "source": self.source,
            "registered": self.registered.to_document() if not self.registered.empty else None,
            "override": self.override.to_document() if self.override is not None else None,
        }


class LimitsView:
    def __init__(
        self,
        registry: JobTypeRegistry,
        *,
        retention: timedelta,
        refresh_s: float = REFRESH_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._registry = registry
        self._retention = retention
        self._refresh_s = refresh_s
        self._monotonic = monotonic
        self._next_refresh = 0.0
        self._types: dict[str, TypeLimits] = {}

    def of(self, job_type: str) -> TypeLimits:
        return self.all().get(job_type, TypeLimits())

    def in_force(self, job_type: str) -> Limits:
        """The type's limits in force (whose start rates an executor's starts keep to)."""
        return self.of(job_type).effective

    def all(self) -> dict[str, TypeLimits]:
        """The types with registered or operator limits."""
        if self._monotonic() >= self._next_refresh:
            self._next_refresh = self._monotonic() + self._refresh_s
            try:
                self._types = self.read()
            except StoreError as exc:
                log.warning("limits not read", extra={"action": "limits_unavailable", "error": str(exc)})
        return self._types

    def set(self, job_type: str, limits: Limits | None) -> None:
        """An operator's limits for the type (None: the registered ones again); `read` has them at once, the
        processes' views within REFRESH_S."""
        self._registry.set_limits(job_type, limits, utc_now())

    def read(self) -> dict[str, TypeLimits]:
        """The limits as the store has them now (no cache)."""
        now = utc_now()
        registered = {
            i.name: i.defaults.limits
            for i in self._registry.job_types(now, now - self._retention)
            if not i.defaults.limits.empty
        }
        overrides = self._registry.limit_overrides()
        return {
            name: TypeLimits(registered.get(name, NO_LIMITS), overrides.get(name))
            for name in sorted(registered.keys() | overrides.keys())
        }


def waiting_for(job: Job, limits: Limits, in_flight: InFlight) -> str | None:
    """Which of its type's limits a due pending job waits for, in words (None: none is full now; it waits for its
    turn in the claims). Counts of other tenants' jobs are never named, only the limit."""
    if limits.concurrency is not None and in_flight.active[job.jobType] >= limits.concurrency:
        return f"the job type's concurrency limit ({limits.concurrency} at once)"
    if limits.concurrency_per_tenant is not None and (
        in_flight.by_tenant[(job.jobType, job.tenantId)] >= limits.concurrency_per_tenant
    ):
        return f"its tenant's limit for the job type ({limits.concurrency_per_tenant} of the tenant's at once)"
    if (
        limits.concurrency_per_key is not None
        and job.concurrencyKey is not None
        and (in_flight.by_key[(job.jobType, job.tenantId, job.concurrencyKey)] >= limits.concurrency_per_key)
    ):
        return f"the limit of its concurrency key ({limits.concurrency_per_key} at once)"
    if limits.rate is not None:
        return f"its turn under the job type's start rate ({limits.rate.describe()})"
    if limits.rate_per_key is not None and job.concurrencyKey is not None:
        return f"its turn under the start rate of its concurrency key ({limits.rate_per_key.describe()})"
    return None
