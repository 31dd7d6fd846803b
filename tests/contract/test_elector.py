"""The Elector contract, run against every implementation: single node and etcd."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import etcd3
import pytest

from shared.election.base import Elector
from shared.election.etcd import EtcdElector, close_etcd_client, parse_endpoints
from shared.election.single import SingleNodeElector
from tests.support import wait_until


@pytest.fixture(params=["single", pytest.param("etcd", marks=pytest.mark.servers)])
def elector(request: pytest.FixtureRequest) -> Iterator[Elector]:
    if request.param == "single":
        yield SingleNodeElector()
        return
    endpoints = request.getfixturevalue("etcd_endpoints")
    node = EtcdElector(endpoints, request.getfixturevalue("etcd_prefix") + "leader", "n1", ttl_s=3)
    yield node
    node.close()


def test_campaign_gives_a_trusted_term_and_resign_ends_it(elector: Elector) -> None:
    term = elector.campaign(threading.Event())
    assert term is not None
    assert term.trusted()
    assert term.token > 0
    elector.resign()
    assert term.lost.is_set()
    assert not term.trusted()
    again = elector.campaign(threading.Event())
    assert again is not None
    assert again.token > term.token  # every term's token is larger: a fencing token


def test_campaign_returns_none_once_stopped(elector: Elector) -> None:
    stop = threading.Event()
    stop.set()
    assert elector.campaign(stop) is None


def test_only_one_etcd_node_leads_and_the_standby_wins_after_resign(etcd_endpoints: str, etcd_prefix: str) -> None:
    key = etcd_prefix + "leader"
    a, b = (EtcdElector(etcd_endpoints, key, name, ttl_s=3) for name in ("a", "b"))
    stop = threading.Event()
    try:
        first = a.campaign(stop)
        assert first is not None
        with ThreadPoolExecutor(1) as pool:
            standby = pool.submit(b.campaign, stop)
            assert not standby.done()  # blocked while a leads
            a.resign()
            second = standby.result(timeout=10)
        assert second is not None
        assert second.token > first.token
    finally:
        stop.set()
        a.close()
        b.close()


def test_a_resignation_before_the_standby_watches_is_still_seen(
    etcd_endpoints: str, etcd_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leader resigns between the standby's look at the key and its watch: the watch, which starts from
    the revision the standby saw, delivers the delete instead of timing out."""
    key = etcd_prefix + "leader"
    a, b = (EtcdElector(etcd_endpoints, key, name, ttl_s=30) for name in ("a", "b"))
    stop = threading.Event()
    watches: list[str] = []
    real_get, real_watch = b._client.get, b._client.watch_once

    def get_then_resign(*args: Any, **kwargs: Any) -> Any:
        seen = real_get(*args, **kwargs)
        if seen[0] is not None and not watches:
            a.resign()  # lands before the standby's watch is registered
        return seen

    def watch(*args: Any, **kwargs: Any) -> Any:
        try:
            event = real_watch(*args, **kwargs)
        except etcd3.exceptions.WatchTimedOut:
            watches.append("timed out")
            raise
        watches.append(type(event).__name__)
        return event

    monkeypatch.setattr(b._client, "get", get_then_resign)
    monkeypatch.setattr(b._client, "watch_once", watch)
    try:
        first = a.campaign(stop)
        assert first is not None
        with ThreadPoolExecutor(1) as pool:
            standby = pool.submit(b.campaign, stop)
            try:
                second = standby.result(timeout=30)
            finally:
                stop.set()  # on failure, let the standby give up instead of campaigning forever
        assert second is not None
        assert second.token > first.token
        assert watches == ["DeleteEvent"]
    finally:
        stop.set()
        a.close()
        b.close()


def test_a_lease_that_disappears_ends_the_term_at_once(etcd_endpoints: str, etcd_prefix: str) -> None:
    node = EtcdElector(etcd_endpoints, etcd_prefix + "leader", "n", ttl_s=3)
    host, port = parse_endpoints(etcd_endpoints)[0]
    other = etcd3.client(host=host, port=port, timeout=5)
    try:
        term = node.campaign(threading.Event())
        assert term is not None
        _, meta = other.get(etcd_prefix + "leader")
        other.revoke_lease(meta.lease_id)  # e.g. an operator, or expiry during a partition
        wait_until(term.lost.is_set, 5, "the keep-alive to notice the lease is gone")
        assert not term.trusted()
    finally:
        close_etcd_client(other)
        node.close()
