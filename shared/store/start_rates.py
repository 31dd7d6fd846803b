"""The per-start check of a start rate (claim_limits.start_allowed, a GCRA), decided once for every store: each
start of a batch, in order, counted against the starts so far. The stores differ only in how they read and write
the starts so far (`startTat`): inside SQLite's write transaction, by a compare-and-set of a MongoDB document."""

from __future__ import annotations

from datetime import UTC, datetime

from jobsched.limits import Rate
from shared.store.base import RateLimited
from shared.store.claim_limits import start_allowed


def counted_starts(
    tat: float, now: datetime, rate: Rate, starts: int, job_type: str
) -> tuple[list[RateLimited | None], float]:
    """`starts` starts of `job_type` at `now` against the rate whose starts so far reach `tat` (unix seconds): per
    start None (it may start now) or RateLimited (when one may), and how far the starts allowed reach."""
    verdicts: list[RateLimited | None] = []
    for _ in range(starts):
        allowed, value = start_allowed(tat, now.timestamp(), rate)
        verdicts.append(None if allowed else RateLimited(job_type, datetime.fromtimestamp(value, UTC)))
        tat = value if allowed else tat
    return verdicts, tat
