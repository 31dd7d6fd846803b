"""Each tenant's signing secrets for its http jobs' requests (signing.py): at most MAX_LIVE at once, so that a new
one can be put in place while receivers still know the old one (rotation: add the new one, give it to the
receivers, remove the old one). A tenant's first secret is made on its first request, so every request is signed;
a secret is shown to the tenant's writer keys (GET /signing-secrets), never to another tenant."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Protocol

from shared.model import format_time, utc_now

MAX_LIVE: Final = 2
MAX_CACHED_TENANTS: Final = 10_000  # a process's cache beyond this keeps only its fresh entries


@dataclass(frozen=True)
class SigningSecret:
    id: str
    tenantId: str
    secret: str
    createdAt: datetime

    @classmethod
    def new(cls, tenant_id: str, now: datetime) -> SigningSecret:
        stored = now.replace(microsecond=now.microsecond // 1000 * 1000)  # as both stores keep times
        return cls(f"ss_{secrets.token_hex(8)}", tenant_id, f"whsec_{secrets.token_urlsafe(32)}", stored)

    def to_wire(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tenantId": self.tenantId,
            "secret": self.secret,
            "createdAt": format_time(self.createdAt),
        }


class TooManySecrets(Exception):
    def __init__(self, tenant_id: str) -> None:
        super().__init__(
            f"tenant {tenant_id} has {MAX_LIVE} live signing secrets, the most it may: remove one first "
            "(DELETE /signing-secrets/{id})"
        )


class SigningSecrets(Protocol):
    def live(self, tenant_id: str) -> list[SigningSecret]:
        """The tenant's live secrets, in the order they were added."""

    def add(self, tenant_id: str, now: datetime) -> SigningSecret:
        """A new secret for the tenant; TooManySecrets when it has MAX_LIVE already (decided atomically)."""

    def remove(self, tenant_id: str, secret_id: str) -> bool:
        """Whether the tenant had that secret (it has not any more)."""

    def first(self, tenant_id: str, now: datetime) -> list[SigningSecret]:
        """The live secrets, the tenant's first one made when it has none (concurrent callers see the same one)."""


class CachedSecrets:
    """What an executor signs with: each tenant's live secrets, read from the store at most every `refresh_s`
    (a rotation reaches the requests within that), the first one made when the tenant has none."""

    def __init__(self, store: SigningSecrets, refresh_s: float = 5.0, clock: Callable[[], float] = time.monotonic):
        self._store = store
        self._refresh_s = refresh_s
        self._clock = clock
        self._known: dict[str, tuple[float, list[str]]] = {}
        self._lock = threading.Lock()

    def __call__(self, tenant_id: str) -> list[str]:
        now = self._clock()
        with self._lock:
            known = self._known.get(tenant_id)
        if known is not None and known[0] > now:
            return known[1]
        found = [s.secret for s in self._store.first(tenant_id, utc_now())]
        with self._lock:
            if len(self._known) >= MAX_CACHED_TENANTS:
                self._known = {t: k for t, k in self._known.items() if k[0] > now}
            self._known[tenant_id] = (now + self._refresh_s, found)
        return found
