"""The Elector seam: at most one scheduler acts as leader, and it knows for how long it may trust that.

A leader trusts itself only until `renewal attempt start + TTL - margin` (River's rule): the lease cannot
have expired before then, whatever the network did. A renewal that fails past that point, or that reports
the lease gone, ends the term at once (`Term.lost` is set) and the dispatch loop stops.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Protocol


@dataclass
class Term:
    """One leadership term. `token` grows with every new term (etcd: the leader key's create_revision)."""

    token: int
    trusted_until: float  # time.monotonic()
    lost: threading.Event = field(default_factory=threading.Event)

    def trusted(self) -> bool:
        return not self.lost.is_set() and time.monotonic() < self.trusted_until

    def extend(self, attempt_started: float, ttl_s: float, margin_s: float) -> None:
        self.trusted_until = max(self.trusted_until, attempt_started + ttl_s - margin_s)


class Elector(Protocol):
    def campaign(self, stop: threading.Event) -> Term | None:
        """Block until this node leads (return its Term) or `stop` is set (return None)."""

    def resign(self) -> None:
        """End the current term now so that a standby takes over without waiting for the lease to expire."""

    def close(self) -> None:
        """Release connections (resigns first if leading)."""
