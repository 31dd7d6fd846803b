"""Every API replica's copy of the API keys: verified in memory, reloaded from the key store every `refresh`.

A request is checked against the copy, not the store: authentication costs one digest and one constant-time
comparison (against a dummy digest when the prefix is unknown, so an unknown prefix and a wrong secret cost
the same), and how long a revocation takes to reach every replica is bounded by one refresh. A snapshot that
could not be renewed for STALE_AFTER_REFRESHES refreshes is not trusted any more (requests get 503) rather
than honouring keys that may have been revoked since. When keys were used is written back once per refresh.

A key made or revoked through this replica's API is in its copy at once (`remember`; a reload that read the
store before that keeps it). A key made elsewhere (another replica, `jobsched keys create`) is found by the
first request that presents it: a well-formed key whose prefix the copy lacks is looked up in the store
(`verify_or_look_up`), one lookup per prefix at a time, on threads of the cache's own. So that made-up keys
cannot turn into store traffic, a prefix found missing is not looked up again until the next refresh, and the
replica makes at most MISS_LOOKUPS_PER_S lookups a second; a key that cannot be looked up now (past that
budget, with every lookup thread busy, or the store unreachable) is answered "not verified yet" (503), never
"invalid", and works from the next refresh.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import dataclass
from typing import Final

import anyio
import anyio.to_thread

from services.api.http.rate_limits import TokenBuckets
from shared.keys import tokens
from shared.keys.base import ApiKey, KeyStore, PrefixTaken
from shared.keys.manage import install_bootstrap_key
from shared.model import utc_now
from shared.store.base import StoreUnavailable

log = logging.getLogger("jobsched.api")
STALE_AFTER_REFRESHES: Final = 5
MIN_STALE_S: Final = 10.0
RETRY_INITIAL_S: Final = 0.5
WAIT_FOR_FIRST_LOAD_S: Final = 5.0
BOOTSTRAP_TENANT: Final = "admin"
MISS_LOOKUPS_PER_S: Final = 20
MISS_LOOKUP_BURST: Final = 40
LOOKUP_THREADS: Final = 2
NOT_VERIFIED: Final = "not_verified"  # a verdict's reason when the key could not be looked up now


@dataclass(frozen=True)
class Verdict:
    """The outcome of checking a presented key: its record, or why it was refused (for the audit log)."""

    key: ApiKey | None
    reason: str


class KeyCache:
    def __init__(self, keys: KeyStore, *, refresh_s: float, bootstrap_key: str | None = None) -> None:
        self._keys = keys
        self._refresh_s = refresh_s
        self._stale_s = max(refresh_s * STALE_AFTER_REFRESHES, MIN_STALE_S)
        self._bootstrap_key = bootstrap_key
        self._prepared = False
        self._snapshot: dict[str, ApiKey] = {}
        self._loaded_at: float | None = None
        self._used: set[str] = set()
        self._first_attempt = asyncio.Event()  # the refresher has tried once, whatever came of it
        self._task: asyncio.Task[None] | None = None
        # Prefixes looked up and not found, with when: a reload forgets those it may have seen created.
        self._missing: dict[str, float] = {}
        # Records this replica made or revoked, with when: a reload that read the store before keeps them.
        self._remembered: dict[str, tuple[float, ApiKey]] = {}
        self._lookups: dict[str, asyncio.Future[ApiKey | None]] = {}
        self._lookup_budget = TokenBuckets(MISS_LOOKUPS_PER_S, MISS_LOOKUP_BURST)
        self._lookup_threads = anyio.CapacityLimiter(LOOKUP_THREADS)
        self._reload_thread = anyio.CapacityLimiter(1)

    def verify(self, presented: str) -> Verdict:
        prefix = tokens.prefix_of(presented)
        record = self._snapshot.get(prefix) if prefix is not None else None
        matched = tokens.matches(presented, record.keyHash if record is not None else tokens.DUMMY_DIGEST)
        if record is None:
            return Verdict(None, "unknown_key" if prefix is not None else "malformed_key")
        if not matched:
            return Verdict(None, "wrong_secret")
        if record.revokedAt is not None:
            return Verdict(None, "revoked_key")
        self._used.add(record.prefix)
        return Verdict(record, "")

    async def verify_or_look_up(self, presented: str) -> Verdict:
        """verify(), after looking a well-formed key of a prefix the copy lacks up in the store (bounded: see the
        module docstring); NOT_VERIFIED when that cannot be done now."""
        verdict = self.verify(presented)
        prefix = tokens.prefix_of(presented)
        if verdict.reason != "unknown_key" or prefix is None or prefix in self._missing:
            return verdict
        lookup = self._lookups.get(prefix)
        if lookup is None:
            if not self._lookup_threads.available_tokens or self._lookup_budget.take("lookups"):
                return Verdict(None, NOT_VERIFIED)
            find = functools.partial(anyio.to_thread.run_sync, self._keys.find, prefix, limiter=self._lookup_threads)
            lookup = self._lookups[prefix] = asyncio.ensure_future(find())
            lookup.add_done_callback(lambda _: self._lookups.pop(prefix, None))
        looked_at = time.monotonic()
        try:
            record = await asyncio.shield(lookup)
        except StoreUnavailable:
            return Verdict(None, NOT_VERIFIED)
        if record is None:
            self._missing[prefix] = looked_at
            return verdict
        self.remember(record)
        return self.verify(presented)

    def remember(self, record: ApiKey) -> None:
        """A key this replica made or revoked: in the copy now rather than at the next refresh."""
        self._snapshot = {**self._snapshot, record.prefix: record}
        self._remembered[record.prefix] = (time.monotonic(), record)
        self._missing.pop(record.prefix, None)

    @property
    def fresh(self) -> bool:
        return self._loaded_at is not None and time.monotonic() - self._loaded_at <= self._stale_s

    async def wait_fresh(self) -> bool:
        """True once the snapshot can be trusted; without a running refresher (no lifespan, as in a bare test
        client) a stale one is reloaded inline."""
        if self.fresh:
            return True
        if self._task is None:
            await self.reload()
            return self.fresh
        if not self._first_attempt.is_set():
            try:
                await asyncio.wait_for(self._first_attempt.wait(), WAIT_FOR_FIRST_LOAD_S)
            except TimeoutError:
                return False
        return self.fresh

    def start(self) -> None:
        self._task = asyncio.create_task(self._refresh_forever())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def reload(self) -> None:
        """One refresh: the store is read on a thread, the copy changed here, on the event loop (where requests
        and `remember` read and change it). Raises StoreUnavailable when the key store cannot be reached."""
        began = time.monotonic()
        used, self._used = self._used, set()
        try:
            keys = await anyio.to_thread.run_sync(self._read, used, limiter=self._reload_thread)
        except BaseException:
            self._used |= used
            raise
        snapshot = {k.prefix: k for k in keys}
        self._remembered = {p: (at, r) for p, (at, r) in self._remembered.items() if at >= began}
        snapshot.update({p: r for p, (_, r) in self._remembered.items()})
        self._snapshot = snapshot
        self._missing = {p: at for p, at in self._missing.items() if at >= began}
        self._loaded_at = time.monotonic()

    def _read(self, used: set[str]) -> list[ApiKey]:
        """Schema and bootstrap key the first time, then the last-used times, then every key (blocking)."""
        if not self._prepared:
            self._keys.ensure_schema()
            if self._bootstrap_key is not None:
                self._install_bootstrap(self._bootstrap_key)
            self._prepared = True
        self._keys.record_use(used, utc_now())
        return self._keys.list_keys()

    def _install_bootstrap(self, key: str) -> None:
        try:
            record = install_bootstrap_key(self._keys, key, BOOTSTRAP_TENANT)
        except PrefixTaken:
            log.error(
                "AUTH_BOOTSTRAP_KEY not installed: its prefix belongs to another key",
                extra={"action": "bootstrap_key_refused", "keyPrefix": tokens.prefix_of(key)},
            )
            return
        if record.revokedAt is not None:
            log.warning(
                "the bootstrap admin key is revoked and stays revoked",
                extra={"action": "bootstrap_key_revoked", "keyPrefix": record.prefix},
            )

    async def _refresh_forever(self) -> None:
        delay = RETRY_INITIAL_S
        while True:
            try:
                await self.reload()
            except Exception as exc:  # the refresher must outlive any failure; a stale snapshot stops serving
                log.warning(
                    "API keys not reloaded",
                    extra={"action": "keys_reload_failed", "error": str(exc)},
                    exc_info=not isinstance(exc, StoreUnavailable),
                )
                self._first_attempt.set()
                await asyncio.sleep(min(delay, self._refresh_s))
                delay *= 2
                continue
            self._first_attempt.set()
            delay = RETRY_INITIAL_S
            await asyncio.sleep(self._refresh_s)
