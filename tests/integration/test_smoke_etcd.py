"""Smoke test against a real etcd 3.4 (deployments/local/etcd.sh) with the python ``etcd3`` 0.12 client.

It checks the primitives the scheduler's leader election relies on: a lease-bound key that is
deleted (and a watch that fires) when the lease expires, and a create-if-absent transaction whose winner's
``create_revision`` is a monotonic fencing token.

Fixtures from tests/conftest.py: ``etcd_endpoints`` ("host:port", session) and ``etcd_prefix`` (a unique key
prefix per test, e.g. "/jobsched-test/ab12cd/").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import etcd3
import pytest
from etcd3.events import DeleteEvent

from shared.election.etcd import close_etcd_client, parse_endpoints

# Per-RPC deadline: with etcd down every call fails with ConnectionFailedError at once, never hangs.
CLIENT_TIMEOUT_S = 5.0
LEASE_TTL_S = 2
# Upper bound for the lease to expire and the watch to report it (etcd checks expiry every 500 ms).
EXPIRY_WAIT_S = LEASE_TTL_S + 8.0


def make_client(endpoints: str, timeout: float = CLIENT_TIMEOUT_S) -> Any:
    host, port = parse_endpoints(endpoints)[0]
    return etcd3.client(host=host, port=port, timeout=timeout)


def wait_for_delete(client: Any, key: str, start_revision: int, timeout: float) -> Any:
    """Watch ``key`` from ``start_revision`` until a DeleteEvent arrives; fail after ``timeout`` seconds.

    Starting at a known revision means the delete is replayed even if it happened before the watch existed.
    """
    done = threading.Event()
    outcome: list[Any] = []

    def on_response(response: Any) -> None:
        # etcd3 passes a WatchResponse, or the exception when the watch stream breaks.
        if isinstance(response, Exception):
            outcome.append(response)
            done.set()
            return
        deletes = [event for event in response.events if isinstance(event, DeleteEvent)]
        if deletes:
            outcome.append(deletes[0])
            done.set()

    watch_id = client.add_watch_callback(key, on_response, start_revision=start_revision)
    try:
        if not done.wait(timeout):
            pytest.fail(f"no DeleteEvent for {key!r} within {timeout}s")
    finally:
        client.cancel_watch(watch_id)
    if isinstance(outcome[0], Exception):
        raise outcome[0]
    return outcome[0]


@pytest.fixture
def etcd_client(etcd_endpoints: str, etcd_prefix: str) -> Iterator[Any]:
    client = make_client(etcd_endpoints)
    yield client
    try:
        client.delete_prefix(etcd_prefix)
    except etcd3.exceptions.Etcd3Exception:
        pass  # best effort: etcd may be the thing that failed
    finally:
        close_etcd_client(client)


def test_lease_expiry_deletes_key_and_fires_watch(etcd_client: Any, etcd_prefix: str) -> None:
    key = etcd_prefix + "leader"
    granted_at = time.monotonic()
    lease = etcd_client.lease(LEASE_TTL_S)
    assert lease.id != 0
    assert lease.ttl >= LEASE_TTL_S  # etcd may round a TTL up to its minimum, never down

    put = etcd_client.put(key, b"node-a", lease=lease)
    value, meta = etcd_client.get(key)
    assert value == b"node-a"
    assert meta.lease_id == lease.id

    event = wait_for_delete(etcd_client, key, start_revision=put.header.revision + 1, timeout=EXPIRY_WAIT_S)
    elapsed = time.monotonic() - granted_at

    assert event.key == key.encode()
    assert elapsed >= LEASE_TTL_S / 2, f"deleted after {elapsed:.2f}s: too early for a {LEASE_TTL_S}s lease"
    assert etcd_client.get(key) == (None, None)
    # Keep-alive on an expired lease does not raise: etcd answers with TTL 0 (verified on 3.4.23), so a
    # leader's keep-alive loop must check the TTL, not only catch exceptions.
    (keepalive,) = lease.refresh()  # one LeaseKeepAliveResponse
    assert lease.id == keepalive.ID
    assert keepalive.TTL <= 0
    assert lease.remaining_ttl == -1  # LeaseTimeToLive of an unknown lease


def _campaign(client: Any, key: str, name: bytes, start: threading.Barrier) -> tuple[bool, list[Any]]:
    txn = client.transactions
    start.wait(timeout=CLIENT_TIMEOUT_S)
    succeeded, responses = client.transaction(
        compare=[txn.create(key) == 0],
        success=[txn.put(key, name)],
        failure=[txn.get(key)],
    )
    return bool(succeeded), responses


def test_create_if_absent_has_one_winner_and_monotonic_fencing_token(
    etcd_endpoints: str, etcd_client: Any, etcd_prefix: str
) -> None:
    etcd_client.put(etcd_prefix + "earlier", b"x")
    _, earlier = etcd_client.get(etcd_prefix + "earlier")
    previous_token = earlier.create_revision
    assert isinstance(previous_token, int)
    assert previous_token > 0

    key = etcd_prefix + "leader"
    names = [b"node-a", b"node-b"]
    clients = [make_client(etcd_endpoints) for _ in names]
    try:
        # Two rounds: the second winner (after the first steps down) must get a larger token too.
        for _ in range(2):
            start = threading.Barrier(len(clients))
            with ThreadPoolExecutor(max_workers=len(clients)) as pool:
                futures = [pool.submit(_campaign, c, key, n, start) for c, n in zip(clients, names, strict=True)]
                results = [f.result(timeout=3 * CLIENT_TIMEOUT_S) for f in futures]

            winners = [name for name, (ok, _) in zip(names, results, strict=True) if ok]
            assert len(winners) == 1, f"expected exactly one winner, got {winners}"
            value, meta = etcd_client.get(key)
            assert value == winners[0]
            # The loser's failure branch read the winner's value.
            (loser_get,) = next(responses for ok, responses in results if not ok)
            assert [v for v, _ in loser_get] == [winners[0]]

            token = meta.create_revision
            assert isinstance(token, int)
            assert token > previous_token
            previous_token = token
            assert etcd_client.delete(key)
    finally:
        for client in clients:
            close_etcd_client(client)
