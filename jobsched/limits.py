"""A job type's limits, enforced across every executor and scheduler of the cluster: how many of its jobs run at
once (in all, per tenant, per concurrency key) and how often one may start.

A start rate may also bind each concurrency key on its own (`rate_per_key`: "at most 1 call a second per
customer"), beside or instead of the type's.

Registered with the handler (`@jobs.handler("send-invoice", limits=jobsched.Limits(concurrency=5))`) and
announced by the executors; an operator may replace them at run time (`PUT /job-types/{name}/limits`). A job held
back by a limit waits `pending`: it is not failed, retried or charged an attempt.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

MAX_LIMIT = 1_000_000
MAX_PERIOD_S = 7 * 24 * 3600.0


def _count(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT):
        raise ValueError(f"{name} must be a whole number from 1 to {MAX_LIMIT} (got {value!r})")


@dataclass(frozen=True)
class Rate:
    """At most `starts` job starts per `per` (seconds, or a timedelta), spread evenly: one every per/starts, with
    up to `burst` back to back after a quiet time. In any window of length `per` at most starts + burst - 1
    start (exactly `starts` with the default burst of 1)."""

    starts: int
    per: float | timedelta = 1.0
    burst: int = 1

    def __post_init__(self) -> None:
        if self.starts is None or self.burst is None:
            raise ValueError("rate starts and burst must be whole numbers from 1 (got null)")
        _count("rate starts", self.starts)
        _count("rate burst", self.burst)
        per = self.per.total_seconds() if isinstance(self.per, timedelta) else self.per
        if isinstance(per, bool) or not isinstance(per, int | float) or not 0 < per <= MAX_PERIOD_S:
            raise ValueError(f"rate period must be more than 0 and at most {MAX_PERIOD_S:g} seconds (got {self.per!r})")
        object.__setattr__(self, "per", float(per))

    @property
    def per_seconds(self) -> float:
        return float(self.per)  # type: ignore[arg-type]  # a float since __post_init__

    @property
    def interval_s(self) -> float:
        """The time one start takes from the budget (the emission interval)."""
        return self.per_seconds / self.starts

    def to_document(self) -> dict[str, Any]:
        return {"starts": self.starts, "perSeconds": self.per_seconds, "burst": self.burst}

    def describe(self) -> str:
        burst = f", burst {self.burst}" if self.burst > 1 else ""
        return f"{self.starts} per {self.per_seconds:g}s{burst}"


@dataclass(frozen=True)
class Limits:
    """`concurrency`: at most this many of the type's jobs claimed or running at once, all tenants together.
    `concurrency_per_tenant`: at most this many of one tenant's. `concurrency_per_key`: at most this many with one
    `concurrencyKey` (a job's own, e.g. a customer id) within a tenant. `rate`: how often one may start (Rate).
    `rate_per_key`: how often one with a given concurrencyKey may start, each key of each tenant on its own (jobs
    without a key are not bound by it). None: no such limit."""

    concurrency: int | None = None
    concurrency_per_tenant: int | None = None
    concurrency_per_key: int | None = None
    rate: Rate | None = None
    rate_per_key: Rate | None = None

    def __post_init__(self) -> None:
        _count("concurrency", self.concurrency)
        _count("concurrency_per_tenant", self.concurrency_per_tenant)
        _count("concurrency_per_key", self.concurrency_per_key)
        for name, rate in (("rate", self.rate), ("rate_per_key", self.rate_per_key)):
            if rate is not None and not isinstance(rate, Rate):
                raise ValueError(f"{name} must be a jobsched.Rate (got {rate!r})")

    @property
    def empty(self) -> bool:
        return self == NO_LIMITS

    def to_document(self) -> dict[str, Any]:
        """The stored and wire form (camelCase)."""
        return {
            "concurrency": self.concurrency,
            "concurrencyPerTenant": self.concurrency_per_tenant,
            "concurrencyPerKey": self.concurrency_per_key,
            "rate": self.rate.to_document() if self.rate is not None else None,
            "ratePerKey": self.rate_per_key.to_document() if self.rate_per_key is not None else None,
        }

    @classmethod
    def from_document(cls, doc: Any) -> Limits:
        """The inverse of to_document. Raises ValueError for what is not a valid limit, naming the field as the
        document names it (`concurrencyPerTenant`, `ratePerKey.starts`)."""
        if doc is None:
            return NO_LIMITS
        if not isinstance(doc, dict):
            raise ValueError("limits must be an object")
        unknown = set(doc) - set(_COUNT_FIELDS) - {"rate", "ratePerKey"}
        if unknown:
            raise ValueError(f"unknown limit fields: {', '.join(sorted(unknown))}")
        for field in _COUNT_FIELDS:
            _count(field, doc.get(field))
        return cls(
            concurrency=doc.get("concurrency"),
            concurrency_per_tenant=doc.get("concurrencyPerTenant"),
            concurrency_per_key=doc.get("concurrencyPerKey"),
            rate=_rate_from_document("rate", doc.get("rate")),
            rate_per_key=_rate_from_document("ratePerKey", doc.get("ratePerKey")),
        )


_COUNT_FIELDS = ("concurrency", "concurrencyPerTenant", "concurrencyPerKey")


def _rate_from_document(name: str, rate: Any) -> Rate | None:
    if rate is None:
        return None
    if not isinstance(rate, dict) or set(rate) - {"starts", "perSeconds", "burst"} or "starts" not in rate:
        raise ValueError(f'{name} must be {{"starts": N, "perSeconds": S, "burst": B}} (perSeconds, burst optional)')
    if any(rate.get(field, 1) is None for field in ("starts", "perSeconds", "burst")):
        raise ValueError(f"{name}: starts must be a whole number; perSeconds and burst may be left out, not null")
    _count(f"{name}.starts", rate["starts"])
    _count(f"{name}.burst", rate.get("burst", 1))
    per = rate.get("perSeconds", 1.0)
    if isinstance(per, bool) or not isinstance(per, int | float) or not 0 < per <= MAX_PERIOD_S:
        raise ValueError(f"{name}.perSeconds must be more than 0 and at most {MAX_PERIOD_S:g} (got {per!r})")
    return Rate(rate["starts"], per, rate.get("burst", 1))


NO_LIMITS = Limits()
