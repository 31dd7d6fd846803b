"""The readiness probe's store ping (services/api/store_ping.py): however many probes ask at once, the store sees
one ping, and its answer, good or bad, is what each of them gets."""

from __future__ import annotations

import asyncio
import threading

import pytest

from services.api.store_ping import StorePing
from shared.store.base import StoreUnavailable


class Store:
    def __init__(self) -> None:
        self.pings = 0
        self.started = threading.Event()
        self.release = threading.Event()
        self.down = False

    def ping(self) -> None:
        self.pings += 1
        self.started.set()
        assert self.release.wait(10)
        if self.down:
            raise StoreUnavailable("down")


def test_probes_asking_at_once_share_one_ping_and_its_answer_for_a_while() -> None:
    store = Store()

    async def scenario() -> None:
        ping = StorePing(store.ping)
        asking = [asyncio.create_task(ping.check()) for _ in range(50)]
        assert await asyncio.to_thread(store.started.wait, 10)  # the ping has begun; every probe waits for it
        store.release.set()
        await asyncio.gather(*asking)
        await ping.check()  # within the answer's freshness: no new ping

    asyncio.run(scenario())
    assert store.pings == 1


def test_a_failed_ping_is_every_waiting_probes_answer() -> None:
    store = Store()
    store.down = True
    store.release.set()

    async def scenario() -> list[BaseException | None]:
        ping = StorePing(store.ping)
        return await asyncio.gather(*(ping.check() for _ in range(5)), return_exceptions=True)

    answers = asyncio.run(scenario())
    assert store.pings == 1
    assert all(isinstance(a, StoreUnavailable) for a in answers)


def test_a_stale_answer_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store()
    store.release.set()
    monkeypatch.setattr("services.api.store_ping.FRESH_S", 0.0)

    async def scenario() -> None:
        ping = StorePing(store.ping)
        await ping.check()
        await ping.check()

    asyncio.run(scenario())
    assert store.pings == 2
