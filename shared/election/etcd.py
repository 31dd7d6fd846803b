"""Leader election on etcd: a create-if-absent key bound to a lease.

The primitives it relies on are checked against a real server in tests/integration/test_smoke_etcd.py.

- campaign: grant a lease, then one transaction `if create_revision(key) == 0: put(key, node, lease)`.
  The winner's key create_revision is the term's fencing token (etcd revisions only grow).
  Losers watch the key and try again when it is deleted (lease expiry or resignation), re-checking at
  least once per TTL in case a delete event was missed.
- keep-alive: a thread renews the lease every TTL/3. A renewal that reports TTL <= 0 (etcd3 does not raise
  for an expired lease) ends the term at once; a failing renewal ends it when the trust window closes.
- resign: delete the key (guarded by the token) and revoke the lease, so a standby wins immediately.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import etcd3
import grpc
from etcd3.exceptions import Etcd3Exception, WatchTimedOut

from shared.election.base import Term

log = logging.getLogger("jobsched.election")
# etcd3 0.12 raises its own exceptions for most failures but lets raw gRPC errors through in some paths
# (revoking an expired lease, a stream cut by a restarting server).
ETCD_ERRORS = (Etcd3Exception, grpc.RpcError)
RETRY_S = 1.0


def parse_endpoints(endpoints: str) -> list[tuple[str, int]]:
    """`host:port[,host:port...]`, optionally with http:// — the first reachable one is used."""
    out = []
    for raw in endpoints.split(","):
        item = raw.strip().removeprefix("http://").removeprefix("https://").rstrip("/")
        if not item:
            continue
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"invalid etcd endpoint {raw!r}: expected host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("ETCD_ENDPOINTS is empty")
    return out


def close_etcd_client(client: Any) -> None:
    """Close the client's channel, also when it has run a watch.

    etcd3 0.12 runs every watch on one background thread that loops forever: once the channel is closed it
    retries and dies with ``ValueError: Cannot invoke RPC: Channel closed!``. That ending is expected, so it
    is swallowed (only that exception, only from that thread) while the thread is joined.
    """
    thread: threading.Thread | None = getattr(client.watcher, "_callback_thread", None)
    if thread is None or not thread.is_alive():
        client.close()
        return
    previous_hook = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        if not (args.thread is thread and args.exc_type is ValueError and "Channel closed" in str(args.exc_value)):
            previous_hook(args)

    threading.excepthook = hook
    try:
        client.close()
        thread.join(timeout=5)
    finally:
        threading.excepthook = previous_hook


class EtcdElector:
    def __init__(
        self,
        endpoints: str,
        key: str,
        node_id: str,
        *,
        ttl_s: int = 10,
        margin_s: float | None = None,
        call_timeout_s: float = 3.0,
    ) -> None:
        self._endpoints = parse_endpoints(endpoints)
        self._endpoint_index = 0
        self._key = key
        self._node_id = node_id
        self._ttl_s = ttl_s
        # Stop trusting the term a little before the lease could expire: clock drift, a slow tick.
        self._margin_s = margin_s if margin_s is not None else max(1.0, ttl_s / 5)
        self._call_timeout_s = call_timeout_s
        self._client = self._connect()
        self._term: Term | None = None
        self._lease: Any = None
        self._keepalive: threading.Thread | None = None

    def _connect(self) -> Any:
        host, port = self._endpoints[self._endpoint_index % len(self._endpoints)]
        return etcd3.client(host=host, port=port, timeout=self._call_timeout_s)

    def _next_endpoint(self) -> None:
        if len(self._endpoints) > 1:
            self._endpoint_index += 1
            close_etcd_client(self._client)
            self._client = self._connect()

    def campaign(self, stop: threading.Event) -> Term | None:
        while not stop.is_set():
            try:
                term = self._try_once()
            except ETCD_ERRORS as exc:
                log.warning("etcd unavailable", extra={"action": "election_error", "error": repr(exc)})
                self._next_endpoint()
                stop.wait(RETRY_S)
                continue
            if term is not None:
                return term
            self._wait_for_vacancy(stop)
        return None

    def _try_once(self) -> Term | None:
        started = time.monotonic()
        lease = self._client.lease(self._ttl_s)
        txn = self._client.transactions
        won, _ = self._client.transaction(
            compare=[txn.create(self._key) == 0],
            success=[txn.put(self._key, self._node_id, lease)],
            failure=[],
        )
        if not won:
            lease.revoke()
            return None
        _, meta = self._client.get(self._key)
        term = Term(token=meta.create_revision, trusted_until=started + self._ttl_s - self._margin_s)
        self._term, self._lease = term, lease
        self._keepalive = threading.Thread(
            target=self._keep_alive, args=(term, lease), daemon=True, name="etcd-keepalive"
        )
        self._keepalive.start()
        log.info("elected leader", extra={"action": "leader_elected", "term": term.token, "node": self._node_id})
        return term

    def _wait_for_vacancy(self, stop: threading.Event) -> None:
        try:
            # Watch from just after the holder's last write: a resignation that lands before the watch is
            # registered is still delivered (watching from "now" missed it and waited for the timeout, 5 s).
            held, meta = self._client.get(self._key)
            if held is None:
                return  # vacant already: campaign again at once
            self._client.watch_once(self._key, timeout=min(self._ttl_s, 5), start_revision=meta.mod_revision + 1)
        except WatchTimedOut:
            pass  # re-check
        except (*ETCD_ERRORS, AttributeError):
            # AttributeError: etcd3 0.12's watch_once reads `.events` off the gRPC error it received when the
            # server went away. Whatever failed, wait a moment and campaign again.
            stop.wait(RETRY_S)

    def _keep_alive(self, term: Term, lease: Any) -> None:
        interval = self._ttl_s / 3
        while not term.lost.wait(interval):
            started = time.monotonic()
            try:
                responses = lease.refresh()
                ttl = responses[0].TTL if responses else 0
            except ETCD_ERRORS as exc:
                if time.monotonic() >= term.trusted_until:
                    self._lose(term, f"renewal failing past the trust window: {exc!r}")
                    return
                interval = min(1.0, self._ttl_s / 3)
                continue
            if ttl <= 0:
                self._lose(term, "lease expired or revoked")
                return
            term.extend(started, self._ttl_s, self._margin_s)
            interval = self._ttl_s / 3

    def _lose(self, term: Term, reason: str) -> None:
        term.lost.set()
        log.warning("leadership lost", extra={"action": "leader_lost", "term": term.token, "reason": reason})

    def resign(self) -> None:
        term, lease = self._term, self._lease
        self._term = self._lease = None
        if term is None:
            return
        term.lost.set()
        try:
            txn = self._client.transactions
            self._client.transaction(
                compare=[txn.create(self._key) == term.token], success=[txn.delete(self._key)], failure=[]
            )
            lease.revoke()
            log.info("resigned", extra={"action": "leader_resigned", "term": term.token})
        except ETCD_ERRORS as exc:
            log.warning("resign failed; the lease will expire", extra={"action": "resign_error", "error": repr(exc)})

    def close(self) -> None:
        self.resign()
        close_etcd_client(self._client)
